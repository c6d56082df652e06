// Activation checkpointing (torch.utils.checkpoint): trade compute for memory.
//
// checkpoint(fn, input, parameters) runs fn(input) with grad mode off, so
// none of fn's intermediate activations are kept; only `input` is saved.  The
// output gets one node, CheckpointBackward, whose backward runs fn again on
// the saved input with grad mode on ("recomputation") and back-propagates the
// incoming gradient through that fresh graph: the gradient of `input` flows
// on to the input's producer, and the gradients of the parameters fn uses
// accumulate into their .grad exactly as without checkpointing.
//
// What the recomputation sees:
//   - the same random draws as the first forward: fn runs both times with
//     default_generator() replaced (on the running thread only, GeneratorGuard)
//     by a generator seeded from one draw of the real default generator, so
//     dropout masks agree between forward and recomputation;
//   - is_recomputing() == true, which BatchNorm reads to skip its running-
//     statistics update (it was made by the first forward; running statistics
//     therefore equal the un-checkpointed run's).
//
// Gradients equal the un-checkpointed run's whenever fn is deterministic
// given its input and random draws.  The output's history is recorded when
// grad mode is on and `input` or one of `parameters` requires grad; otherwise
// checkpoint is plain fn(input).  `parameters` only decides that (a stage
// whose input is raw data still needs its weights' gradients); gradients go
// to whatever tensors fn's recomputed graph reaches.
//
// retain_graph works (each backward recomputes).  The recomputation's own
// backward is a nested pass of the engine on the thread running
// CheckpointBackward (the output's device); fn must keep its work on that
// device (true for a pipeline stage).  Hooks that queue_callback() from inside
// fn's graph (DDP's reducer) see the nested pass, as with PyTorch's reentrant
// checkpoint; do not combine checkpointing with DDP's overlap.
//
// Throws loom::Error for an empty fn, an undefined input, or an fn that
// returns an undefined tensor.
#pragma once

#include <functional>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace autograd {

using CheckpointFn = std::function<Tensor(const Tensor&)>;

Tensor checkpoint(const CheckpointFn& fn, const Tensor& input,
                  const std::vector<Tensor>& parameters = {});

// True while this thread recomputes a checkpointed forward.
bool is_recomputing();

}  // namespace autograd
}  // namespace loom
