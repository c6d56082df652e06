// The autograd engine: runs backward over the recorded graph.
//
// Dependencies are counted first; a node runs once every gradient for it has
// arrived (summed).  Nodes on the device of the first root run on the calling
// thread; nodes on other devices run on that device's engine thread (one ready
// queue per device, as in PyTorch), so backward work of two pipeline stages on
// cpu:0 and cpu:1 overlaps.  An exception in any node stops the pass and is
// rethrown to the caller.
//
// queue_callback() lets a hook schedule work for the end of the pass (DDP
// waits for its all-reduces there), as torch's Variable._execution_engine.
// queue_callback.
#pragma once

#include <functional>
#include <vector>

#include "autograd/Node.h"

namespace loom {
namespace autograd {

// Computes gradients of `roots` (seeded with `grad_roots`, which may be
// undefined for one-element roots) and accumulates them into leaves' .grad.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              bool retain_graph = false, bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad.  An input that the
// outputs do not depend on throws unless allow_unused (then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// Queues fn to run once the backward pass (or grad()) that is running on this
// thread has finished every node, on the thread that called backward, before
// backward returns.  Callbacks run in the order queued; one may queue more.
// An exception from a callback propagates out of backward (later callbacks
// are skipped); when the pass itself fails, its callbacks are dropped.
// Throws when called outside a backward pass (not from a hook, a node's
// backward rule, or another final callback).
void queue_callback(std::function<void()> fn);

}  // namespace autograd
}  // namespace loom
