#include "nn/parallel/Replica.h"

#include "autograd/GradMode.h"
#include "autograd/functions/Record.h"
#include "tensor/Error.h"
#include "tensor/Generator.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {
namespace parallel {
namespace {

// The backward of the broadcast of one parameter to a replica: the replica's
// gradient goes back to the original's device (and dtype), where the engine
// sums it with the other replicas' before accumulating it into .grad.  Runs
// on the replica's device thread as soon as it is ready (a hand-over).
class BroadcastBackward final : public autograd::Node {
 public:
  BroadcastBackward(Device device, DType dtype) : device_(device), dtype_(dtype) {}
  std::string name() const override { return "BroadcastBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    // Tensor::to records history only under create_graph (the engine's grad mode).
    return {grads[0].to(device_, dtype_)};
  }

 private:
  Device device_;
  DType dtype_;
};

// Points `target`'s handle at `source`'s memory (every holder of the handle,
// such as a layer's `weight` member, sees it).  Same shape and dtype.
void adopt_memory(const Tensor& target, const Tensor& source) {
  TensorImpl& dst = *target.impl();
  const TensorImpl& src = *source.impl();
  dst.storage = src.storage;
  dst.strides = src.strides;
  dst.storage_offset = src.storage_offset;
  target.bump_version();
}

const void* data_of(const Tensor& t) {
  return static_cast<const char*>(t.storage().data()) +
         t.storage_offset() * static_cast<int64_t>(t.element_size());
}

}  // namespace

ModuleState ModuleState::of(Module& module) {
  ModuleState state;
  for (const auto& [name, t] : module.named_parameters()) {
    state.names.push_back(name);
    state.tensors.push_back(t);
  }
  state.parameters = state.tensors.size();
  for (const auto& [name, t] : module.named_buffers()) {
    state.names.push_back(name);
    state.tensors.push_back(t);
  }
  for (const auto& m : module.modules()) state.modules.push_back(m.get());
  return state;
}

bool ModuleState::same_layout(const ModuleState& other) const {
  if (parameters != other.parameters || tensors.size() != other.tensors.size() ||
      modules != other.modules)
    return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& a = tensors[i];
    const Tensor& b = other.tensors[i];
    if (!a.is_same(b) || a.sizes() != b.sizes() || a.dtype() != b.dtype() || names[i] != other.names[i])
      return false;
  }
  return true;
}

Replica::Replica(Module& original, const ModuleState& state, Device device) : device_(device) {
  {
    // clone() re-initialises before it copies the values; those draws must
    // not move the user's random stream (dropout masks, shuffling).
    Generator scratch;
    GeneratorGuard guard(&scratch);
    try {
      module_ = original.clone(device);
    } catch (const std::exception& e) {
      LOOM_FAIL("DataParallel: cannot replicate ", original.type_name(), " onto ", device, ": ",
                e.what());
    }
  }
  LOOM_CHECK(module_ != nullptr, "DataParallel: ", original.type_name(),
             ".clone() returned null; cannot replicate it onto ", device);
  const ModuleState mine = ModuleState::of(*module_);
  LOOM_CHECK(mine.parameters == state.parameters && mine.tensors.size() == state.tensors.size() &&
                 mine.modules.size() == state.modules.size(),
             "DataParallel: the clone of ", original.type_name(), " has ", mine.parameters,
             " parameters, ", mine.tensors.size() - mine.parameters, " buffers and ",
             mine.modules.size(), " modules, but the original has ", state.parameters, ", ",
             state.tensors.size() - state.parameters, " and ", state.modules.size(),
             "; its clone() must rebuild every child");
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const Tensor& a = state.tensors[i];
    const Tensor& b = mine.tensors[i];
    LOOM_CHECK(mine.names[i] == state.names[i] && a.sizes() == b.sizes() && a.dtype() == b.dtype(),
               "DataParallel: the clone of ", original.type_name(), " holds \"", mine.names[i],
               "\" ", b.describe(), " where the original holds \"", state.names[i], "\" ",
               a.describe());
  }
  tensors_ = mine.tensors;
  modules_ = mine.modules;
  copied_.resize(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) remember(i, state.tensors[i]);
}

int64_t Replica::bytes() const {
  int64_t total = 0;
  for (const Tensor& t : tensors_) total += static_cast<int64_t>(t.nbytes());
  return total;
}

void Replica::remember(size_t i, const Tensor& source) {
  copied_[i] = Copied{true, source.version(), data_of(source), tensors_[i].version()};
}

void Replica::invalidate() {
  for (Copied& c : copied_) c.valid = false;
}

void Replica::link(const ModuleState& state) {
  for (size_t j = 0; j < modules_.size(); ++j) {
    // Pre-order: a parent's train() also sets its children, which come later.
    const bool on = state.modules[j]->is_training();
    if (modules_[j]->is_training() != on) modules_[j]->train(on);
  }
  for (size_t i = 0; i < state.parameters; ++i) {
    const Tensor& source = state.tensors[i];
    Tensor& target = tensors_[i];
    if (source.is_floating_point()) {
      if (auto node = autograd::record<BroadcastBackward>({source}, {target}, source.device(),
                                                          source.dtype())) {
        node->set_sequence_nr(autograd::kHandOverPriority);
        continue;
      }
    }
    target.detach_();  // no graph this forward: a plain tensor
  }
}

SyncCounts Replica::sync(const ModuleState& state, bool copy_all, bool fresh_memory) {
  autograd::NoGradGuard no_grad;
  SyncCounts counts;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& source = state.tensors[i];
    const Tensor& target = tensors_[i];
    const Copied& last = copied_[i];
    if (!copy_all && last.valid && last.source_version == source.version() &&
        last.source_data == data_of(source) && last.target_version == target.version()) {
      ++counts.skipped;
      continue;
    }
    if (fresh_memory) {
      Tensor fresh = source.device() == device_ ? native::clone(source)
                                                 : native::to(source, device_, source.dtype());
      adopt_memory(target, fresh);
    } else {
      native::copy_(target, source);
    }
    remember(i, source);
    ++counts.copied;
    counts.bytes += static_cast<int64_t>(source.nbytes());
  }
  return counts;
}

}  // namespace parallel
}  // namespace nn
}  // namespace loom
