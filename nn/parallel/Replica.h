// Replica: a copy of a module on another device that DataParallel keeps
// from one forward to the next.
//
// PyTorch's DataParallel builds its replicas anew in every forward (new
// module objects, every parameter and buffer broadcast into fresh memory).
// loom builds a replica once, by clone(), and before each forward only
//   1. link():  on the calling thread, makes each replica parameter a
//               non-leaf whose grad_fn (BroadcastBackward) sends its
//               gradient to the original parameter's device, where the
//               engine adds it to the other replicas' into the original's
//               .grad: the broadcast is differentiable, as PyTorch's.  A new
//               node per forward (the last forward's graph is gone); without
//               grad mode, or for a parameter that does not require grad,
//               the replica's tensor is a plain one.  Training flags are
//               copied module by module here too.
//   2. sync():  on the replica's device stream, brings the values up to
//               date.  A tensor is skipped when neither the original's
//               version (bumped by every in-place write: optimizer steps,
//               BatchNorm statistics, load_state_dict) nor the replica's has
//               moved since the last copy, and the original's memory is the
//               same; otherwise it is copied in place.  Frozen parameters,
//               evaluation, and the forwards of gradient accumulation copy
//               nothing.
// Sharing host memory (SyncPolicy::share_host_memory): CPU logical devices
// all address the same host memory, so a replica parameter on cpu:1 can be
// a cpu:1 tensor over the original's bytes (and version counter) instead of
// a copy: the broadcast costs nothing, and an optimizer step is seen at once.
// Likewise BroadcastBackward hands the replica's gradient to cpu:0 without
// copying it.  Buffers are always copied (each replica's BatchNorm writes its
// own statistics).  The forward must then not write parameters in place
// (replicas run at the same time).
//
// Writes that bypass the version counter (through data_ptr()) and changes to
// plain members of a module are not seen; DataParallel::invalidate_replicas()
// rebuilds the replicas for those.
//
// The pairing of original and replica tensors is by position in
// ModuleState (named_parameters() then named_buffers()); DataParallel
// rebuilds its replicas whenever the original's layout (tensor identities,
// shapes, dtypes, modules) changes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/Module.h"

namespace loom {
namespace nn {
namespace parallel {

// What replicas copy from a module, read before each forward: every
// parameter, then every buffer, and every module in pre-order.
struct ModuleState {
  std::vector<std::string> names;  // "fc.weight", ..., then "bn.running_mean", ...
  std::vector<Tensor> tensors;     // the module's own handles
  size_t parameters = 0;           // tensors[0, parameters) are parameters
  std::vector<Module*> modules;    // pre-order, the module itself first

  static ModuleState of(Module& module);
  // Same tensors (identity, shape, dtype) and the same modules.
  bool same_layout(const ModuleState& other) const;
};

// How a replica follows its original.
struct SyncPolicy {
  // Copy every tensor, changed or not.
  bool copy_all = false;
  // Copy into newly allocated memory (as PyTorch's broadcast does).
  bool fresh_memory = false;
  // Parameters (and their gradients) on CPU logical devices share the
  // original's host memory instead of being copied (see the note above).
  bool share_host_memory = false;
};

// What one sync() did.
struct SyncCounts {
  int64_t copied = 0;   // tensors copied into the replica
  int64_t shared = 0;   // parameters made to share the original's memory
  int64_t skipped = 0;  // tensors left as they were (unchanged, or shared already)
  int64_t bytes = 0;    // bytes copied
};

class Replica {
 public:
  // Clones `original` (whose state is `state`) onto `device`, values
  // included, without drawing from the default random generator.  Throws
  // loom::Error naming the module when it does not support clone() or when
  // the clone's parameters and buffers do not match the original's.
  Replica(Module& original, const ModuleState& state, Device device, SyncPolicy policy);

  Module& module() const { return *module_; }
  const std::shared_ptr<Module>& module_ptr() const { return module_; }
  Device device() const { return device_; }
  // Bytes of parameters and buffers (what the clone copied).
  int64_t bytes() const;

  // Calling thread, before the forward: training flags module by module and
  // the autograd links of the parameters (see the note at the top).
  void link(const ModuleState& state);
  // On the replica's stream: brings the parameters (parameters = true) or
  // the buffers up to date with `state`.
  SyncCounts sync(const ModuleState& state, bool parameters);

 private:
  // The original's version and memory, and the replica's version, when
  // tensor i was last copied.
  struct Copied {
    bool valid = false;
    uint64_t source_version = 0;
    const void* source_data = nullptr;
    uint64_t target_version = 0;
  };
  void remember(size_t i, const Tensor& source);
  bool shares_host_memory(const Tensor& source) const;

  std::shared_ptr<Module> module_;
  Device device_;
  SyncPolicy policy_;
  std::vector<Tensor> tensors_;   // the replica's parameters then buffers
  std::vector<Module*> modules_;  // pre-order, as ModuleState::modules
  std::vector<Copied> copied_;
};

}  // namespace parallel
}  // namespace nn
}  // namespace loom
