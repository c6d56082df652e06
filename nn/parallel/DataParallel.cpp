#include "nn/parallel/DataParallel.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <sstream>

#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"
#include "tensor/Parallel.h"
#include "tensor/Stream.h"

namespace loom {
namespace nn {
namespace {

std::string list_str(const std::vector<Device>& devices) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < devices.size(); ++i) out << (i ? ", " : "") << devices[i];
  out << "]";
  return out.str();
}

// The device type of the module: its first parameter's or buffer's; CPU for
// a module with neither.
DeviceType module_device_type(Module& module) {
  for (const Tensor& t : module.parameters()) return t.device().type;
  for (const Tensor& t : module.buffers()) return t.device().type;
  return kCPU;
}

std::vector<Device> all_devices(DeviceType type) {
  std::vector<Device> out;
  if (type == kCUDA) {
    const int n = cuda::device_count();
    LOOM_CHECK(n > 0, "DataParallel: the module is on a CUDA device but no GPU is visible",
               cuda::built_with_cuda() ? "" : " (loom was built without CUDA)",
               "; pass device_ids explicitly");
    for (int i = 0; i < n; ++i) out.emplace_back(kCUDA, i);
  } else {
    const int n = std::max(1, get_num_threads());
    for (int i = 0; i < n; ++i) out.emplace_back(kCPU, i);
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

DataParallelImpl::DataParallelImpl(std::shared_ptr<Module> module, std::vector<Device> device_ids,
                                   std::optional<Device> output_device, int64_t dim)
    : Module("DataParallel"), module_(std::move(module)), device_ids_(std::move(device_ids)),
      dim_(dim) {
  LOOM_CHECK(module_ != nullptr, "DataParallel: the module is null");
  if (device_ids_.empty()) device_ids_ = all_devices(module_device_type(*module_));
  for (const Device& d : device_ids_) {
    LOOM_CHECK(d.type == device_ids_[0].type, "DataParallel: device_ids ", list_str(device_ids_),
               " mix CPU and CUDA devices; use devices of one type");
    if (d.is_cuda()) cuda::check_device(d.index, "DataParallel");
  }
  output_device_ = output_device.value_or(device_ids_[0]);
  if (output_device_.is_cuda()) cuda::check_device(output_device_.index, "DataParallel");
  register_module("module", module_);
  replicas_.resize(device_ids_.size());
}

Tensor DataParallelImpl::forward(const Tensor& input) {
  return forward_with([](Module& m, const Tensor& x) { return m.forward(x); }, input);
}

const parallel::ModuleState& DataParallelImpl::begin_forward() {
  parallel::ModuleState state = parallel::ModuleState::of(*module_);
  const Device home = device_ids_[0];
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const Tensor& t = state.tensors[i];
    LOOM_CHECK(t.device() == home, "DataParallel: module must have its parameters and buffers "
               "on device_ids[0] (", home, ") but ", i < state.parameters ? "parameter" : "buffer",
               " \"", state.names[i], "\" is on ", t.device(), "; move the module there first "
               "(module->to(", home, "))");
  }
  if (!state.same_layout(state_)) {
    for (auto& r : replicas_) r.reset();
  }
  state_ = std::move(state);
  return state_;
}

void DataParallelImpl::run_replicas(size_t chunks, const std::function<void(Module&, size_t)>& fn) {
  LOOM_CHECK(chunks >= 1 && chunks <= device_ids_.size(), "DataParallel: ", chunks,
             " chunks for ", device_ids_.size(), " devices");
  ReplicationStats stats;
  stats.replicas = static_cast<int64_t>(chunks);
  const auto start = std::chrono::steady_clock::now();
  for (size_t k = 1; k < chunks; ++k) {
    if (!replicas_[k] || replication_ == Replication::kCloneEveryForward) {
      replicas_[k].reset();
      replicas_[k] =
          std::make_unique<parallel::Replica>(*module_, state_, device_ids_[k], sync_policy());
      ++stats.replicas_built;
      stats.bytes_copied += replicas_[k]->bytes();
      stats.tensors_copied += static_cast<int64_t>(state_.tensors.size());
    }
    replicas_[k]->link(state_);
  }
  stats.build_ms = ms_since(start);

  // Every closure below refers to these locals: nothing may leave this
  // function before every stream that got one has run it.
  std::vector<Stream> streams;
  for (size_t k = 0; k < chunks; ++k) streams.push_back(Stream::default_stream(device_ids_[k]));
  std::vector<Stream> distinct;
  for (const Stream& s : streams)
    if (std::find(distinct.begin(), distinct.end(), s) == distinct.end()) distinct.push_back(s);
  auto wait_all = [&]() {
    std::exception_ptr first;
    for (const Stream& s : distinct) {
      try {
        s.synchronize();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    return first;
  };

  std::vector<std::exception_ptr> sync_errors(chunks), errors(chunks);
  std::vector<parallel::SyncCounts> counts(chunks);
  std::vector<double> copied_ms(chunks, 0.0);
  // Replica 0 is the module itself, and its forward writes its buffers
  // (BatchNorm statistics) in place: it starts once every replica has copied
  // them.  Under kKeep the parameters (which no forward writes) are copied
  // meanwhile; the PyTorch-style modes broadcast everything first, as
  // PyTorch does.
  const bool buffers_first = replication_ == Replication::kKeep ||
                             replication_ == Replication::kKeepCopies;
  auto sync = [&](size_t k, bool parameters) {
    if (sync_errors[k]) return;
    try {
      const parallel::SyncCounts c = replicas_[k]->sync(state_, parameters);
      counts[k].copied += c.copied;
      counts[k].shared += c.shared;
      counts[k].skipped += c.skipped;
      counts[k].bytes += c.bytes;
    } catch (...) {
      sync_errors[k] = std::current_exception();
    }
    copied_ms[k] = ms_since(start);
  };
  try {
    for (size_t k = 1; k < chunks; ++k) {
      streams[k].submit([&, k] {
        sync(k, /*parameters=*/false);
        if (!buffers_first) sync(k, /*parameters=*/true);
      });
    }
    for (size_t k = 1; k < chunks; ++k)
      if (streams[k] != streams[0]) streams[0].wait_event(streams[k].record());
    if (buffers_first)
      for (size_t k = 1; k < chunks; ++k) streams[k].submit([&, k] { sync(k, /*parameters=*/true); });
    // The forwards, all devices at once.
    for (size_t k = 0; k < chunks; ++k) {
      streams[k].submit([&, k] {
        if (sync_errors[k]) return;
        try {
          fn(k == 0 ? *module_ : replicas_[k]->module(), k);
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    }
  } catch (...) {
    (void)wait_all();
    throw;
  }
  if (std::exception_ptr stream_error = wait_all()) {
    invalidate_replicas();
    std::rethrow_exception(stream_error);
  }

  for (size_t k = 1; k < chunks; ++k) {
    stats.tensors_copied += counts[k].copied;
    stats.tensors_shared += counts[k].shared;
    stats.tensors_skipped += counts[k].skipped;
    stats.bytes_copied += counts[k].bytes;
    stats.copy_ms = std::max(stats.copy_ms, copied_ms[k]);
  }
  stats_ = stats;
  for (size_t k = 0; k < chunks; ++k) {
    if (sync_errors[k]) {
      replicas_[k].reset();  // its copies may be half done: rebuild it next time
      LOOM_FAIL("DataParallel: copying the module's parameters and buffers to replica ", k,
                " on ", device_ids_[k], " failed: ", what_of(sync_errors[k]));
    }
  }
  for (size_t k = 0; k < chunks; ++k) {
    if (errors[k])
      LOOM_FAIL("DataParallel: replica ", k, " on ", device_ids_[k], ": ", what_of(errors[k]));
  }
}

parallel::SyncPolicy DataParallelImpl::sync_policy() const {
  parallel::SyncPolicy policy;
  policy.share_host_memory = replication_ == Replication::kKeep;
  policy.copy_all = replication_ == Replication::kBroadcastAll;
  policy.fresh_memory = replication_ == Replication::kBroadcastAll;
  return policy;
}

void DataParallelImpl::set_replication(Replication replication) {
  replication_ = replication;
  invalidate_replicas();
}

std::shared_ptr<Module> DataParallelImpl::replica(size_t k) const {
  LOOM_CHECK(k >= 1 && k < device_ids_.size(), "DataParallel::replica: expected 1 <= k < ",
             device_ids_.size(), " (replica 0 is module()), got ", k);
  return replicas_[k] ? replicas_[k]->module_ptr() : nullptr;
}

void DataParallelImpl::invalidate_replicas() {
  for (auto& r : replicas_) r.reset();
}

void DataParallelImpl::to(Device device, bool non_blocking) {
  invalidate_replicas();
  Module::to(device, non_blocking);
}

void DataParallelImpl::to(DType dtype) {
  invalidate_replicas();
  Module::to(dtype);
}

void DataParallelImpl::pretty_print(std::ostream& out) const {
  out << "DataParallel(device_ids=" << list_str(device_ids_) << ", output_device="
      << output_device_ << ", dim=" << dim_ << ")";
}

}  // namespace nn
}  // namespace loom
