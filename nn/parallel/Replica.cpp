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

// A tensor on `device`, a CPU logical device, over t's host memory and
// version counter: no copy.  The memory stays alive while either lives.
Tensor host_alias(const Tensor& t, Device device) {
  const Storage& storage = t.storage();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage(storage.data(), storage.nbytes(), device, [keep = storage](void*) {});
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->storage_offset = t.storage_offset();
  impl->dtype = t.dtype();
  impl->device = device;
  impl->version = t.impl()->version;
  return Tensor(impl);
}

// The backward of the broadcast of one parameter to a replica: the replica's
// gradient goes back to the original's device (and dtype), where the engine
// sums it with the other replicas' before accumulating it into .grad.  Runs
// on the replica's device thread as soon as it is ready (a hand-over).
class BroadcastBackward final : public autograd::Node {
 public:
  BroadcastBackward(Device device, DType dtype, bool share_host_memory)
      : device_(device), dtype_(dtype), share_(share_host_memory) {}
  std::string name() const override { return "BroadcastBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    // Between CPU logical devices the gradient can change hands without a
    // copy, provided nothing else holds its memory (the engine may add into
    // it in place).  Under create_graph, Tensor::to records the history.
    if (share_ && g.is_cpu() && device_.is_cpu() && g.dtype() == dtype_ &&
        !autograd::GradMode::is_enabled() && g.impl_ptr().use_count() == 1 &&
        g.storage().use_count() == 1)
      return {host_alias(g, device_)};
    return {g.to(device_, dtype_)};
  }

 private:
  Device device_;
  DType dtype_;
  bool share_;
};

// Points `target`'s handle (and so every holder of it, such as a layer's
// `weight` member) at `source`'s memory.  Same shape and dtype.
void adopt_memory(const Tensor& target, const Tensor& source) {
  TensorImpl& dst = *target.impl();
  const TensorImpl& src = *source.impl();
  dst.storage = src.storage;
  dst.strides = src.strides;
  dst.storage_offset = src.storage_offset;
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

Replica::Replica(Module& original, const ModuleState& state, Device device, SyncPolicy policy)
    : device_(device), policy_(policy) {
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

bool Replica::shares_host_memory(const Tensor& source) const {
  return policy_.share_host_memory && source.is_cpu() && device_.is_cpu();
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
      if (auto node = autograd::record<BroadcastBackward>(
              {source}, {target}, source.device(), source.dtype(), shares_host_memory(source))) {
        node->set_sequence_nr(autograd::kHandOverPriority);
        continue;
      }
    }
    target.detach_();  // no graph this forward: a plain tensor
  }
}

SyncCounts Replica::sync(const ModuleState& state, bool parameters) {
  autograd::NoGradGuard no_grad;
  SyncCounts counts;
  const size_t begin = parameters ? 0 : state.parameters;
  const size_t end = parameters ? state.parameters : state.tensors.size();
  for (size_t i = begin; i < end; ++i) {
    const Tensor& source = state.tensors[i];
    const Tensor& target = tensors_[i];
    if (parameters && shares_host_memory(source)) {
      TensorImpl& dst = *target.impl();
      const TensorImpl& src = *source.impl();
      if (dst.storage.data() == src.storage.data() && dst.version == src.version &&
          dst.storage_offset == src.storage_offset && dst.strides == src.strides) {
        ++counts.skipped;
      } else {
        adopt_memory(target, host_alias(source, device_));
        dst.version = src.version;  // in-place writes to either are seen by both
        ++counts.shared;
      }
      continue;
    }
    const Copied& last = copied_[i];
    if (!policy_.copy_all && last.valid && last.source_version == source.version() &&
        last.source_data == data_of(source) && last.target_version == target.version()) {
      ++counts.skipped;
      continue;
    }
    if (policy_.fresh_memory) {
      adopt_memory(target, source.device() == device_ ? native::clone(source)
                                                      : native::to(source, device_, source.dtype()));
      target.bump_version();
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
