#include "distributed/parallel/DistributedDataParallel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "autograd/GradMode.h"
#include "autograd/functions/Shape.h"
#include "distributed/DefaultGroup.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace distributed {

// ---- broadcast_coalesced ----------------------------------------------------------

namespace {

// Tensors the group takes on the CPU travel as one byte buffer, whatever
// their dtypes: one collective instead of one per dtype (each collective costs
// a round trip, two with gloo's consistency check, and DDP broadcasts buffers
// before every forward).  CUDA tensors under gloo come through the host too.
void broadcast_bytes(const std::vector<Tensor>& members, Device on, const ProcessGroupPtr& group,
                     int root) {
  size_t total = 0;
  for (const Tensor& t : members) total += t.nbytes();
  Tensor flat = empty({static_cast<int64_t>(total)}, TensorOptions(kUInt8).device(on));
  auto* bytes = flat.data_ptr<uint8_t>();
  if (group->rank() == root) {
    size_t offset = 0;
    for (const Tensor& t : members) {
      const Tensor c = t.detach().to(Device(kCPU)).contiguous();
      std::memcpy(bytes + offset, c.data_ptr(), c.nbytes());
      offset += c.nbytes();
    }
  }
  group->broadcast(flat, root)->wait();
  if (group->rank() == root) return;
  size_t offset = 0;
  for (const Tensor& t : members) {
    Tensor dst = t.detach();
    Tensor staged = empty(t.sizes(), TensorOptions(t.dtype()));
    std::memcpy(staged.data_ptr(), bytes + offset, staged.nbytes());
    dst.copy_(staged);
    offset += staged.nbytes();
  }
}

// Tensors of one dtype broadcast as one flat buffer on `device` (a CUDA
// device under nccl), packed and unpacked with copies (no cat: it need not
// exist for the device).
void broadcast_flat(const std::vector<Tensor>& members, DType dtype, Device device,
                    const ProcessGroupPtr& group, int root) {
  int64_t total = 0;
  for (const Tensor& t : members) total += t.numel();
  Tensor flat = empty({total}, TensorOptions(dtype).device(device));
  const bool is_root = group->rank() == root;
  int64_t offset = 0;
  if (is_root) {
    for (const Tensor& t : members) {
      flat.narrow(0, offset, t.numel()).copy_(t.detach().reshape({-1}));
      offset += t.numel();
    }
  }
  group->broadcast(flat, root)->wait();
  if (is_root) return;
  offset = 0;
  for (const Tensor& t : members) {
    Tensor dst = t.detach();
    dst.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace

void broadcast_coalesced(const std::vector<Tensor>& tensors, const ProcessGroupPtr& group,
                         int root) {
  LOOM_CHECK(group != nullptr, "broadcast_coalesced: the process group is null");
  LOOM_CHECK(root >= 0 && root < group->size(), "broadcast_coalesced: root ", root,
             " is not a rank of a group of size ", group->size());
  autograd::NoGradGuard no_grad;
  // Groups in order of first appearance, identical on every rank, keyed by
  // the device the group communicates them on (group->device_for): one per
  // device on the CPU, one per (dtype, device) elsewhere.
  std::vector<std::pair<std::pair<DType, Device>, std::vector<Tensor>>> groups;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    const Device on = group->device_for(t.device());
    const auto key = std::make_pair(on.is_cpu() ? kUInt8 : t.dtype(), on);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(t);
  }
  for (auto& [key, members] : groups) {
    if (key.second.is_cpu())
      broadcast_bytes(members, key.second, group, root);
    else
      broadcast_flat(members, key.first, key.second, group, root);
  }
}

// ---- DistributedDataParallelImpl ----------------------------------------------------

namespace {

uint64_t fnv1a(const std::vector<int64_t>& values) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : values) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (static_cast<uint64_t>(v) >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

// (dtype, shape) of each tensor, decoded from a signature.
struct Entry {
  int64_t dtype;
  IntList sizes;
};

std::vector<Entry> decode(const int64_t* data, int64_t length) {
  std::vector<Entry> out;
  int64_t k = 0;
  while (k + 1 < length) {
    Entry e;
    e.dtype = data[k];
    const int64_t dim = data[k + 1];
    if (dim < 0 || k + 2 + dim > length) break;
    e.sizes.assign(data + k + 2, data + k + 2 + dim);
    out.push_back(e);
    k += 2 + dim;
  }
  return out;
}

std::string entry_str(const Entry& e) {
  return dtype_name(static_cast<DType>(e.dtype)) + " " + shape_str(e.sizes);
}

}  // namespace

DistributedDataParallelImpl::DistributedDataParallelImpl(std::shared_ptr<nn::Module> module,
                                                         ProcessGroupPtr group, DDPOptions options)
    : Module("DistributedDataParallel"),
      module_(std::move(module)),
      group_(group ? std::move(group) : (is_initialized() ? default_group() : nullptr)),
      options_(std::move(options)) {
  LOOM_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  LOOM_CHECK(group_ != nullptr, "DistributedDataParallel: no process group: pass one, or call "
             "distributed::init_process_group first to use the default group");
  LOOM_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0,
             "DistributedDataParallel: bucket_cap_mb and first_bucket_cap_mb must be positive, "
             "got ", options_.bucket_cap_mb, " and ", options_.first_bucket_cap_mb);
  register_module("module", module_);

  std::vector<std::pair<std::string, Tensor>> all;  // parameters, then buffers
  std::vector<Tensor> params;
  for (const auto& [name, p] : module_->named_parameters()) {
    all.emplace_back(name, p);
    if (!p.requires_grad()) continue;  // frozen: nothing to synchronise
    params.push_back(p);
    param_names_.push_back(name);
  }
  for (const auto& [name, b] : module_->named_buffers()) all.emplace_back(name, b);
  LOOM_CHECK(!params.empty(), "DistributedDataParallel: the module has no parameter that "
             "requires grad; there is nothing to synchronise");

  if (!options_.device_ids.empty()) {
    LOOM_CHECK(options_.device_ids.size() == 1, "DistributedDataParallel: device_ids must name "
               "one device per process (got ", options_.device_ids.size(), "); leave it empty "
               "for a module spread over several devices");
    for (size_t i = 0; i < params.size(); ++i)
      LOOM_CHECK(params[i].device() == options_.device_ids[0], "DistributedDataParallel: "
                 "device_ids is [", options_.device_ids[0], "] but parameter \"",
                 param_names_[i], "\" is on ", params[i].device(), "; move the module with "
                 "module->to(device) first");
  }

  if (group_->backend() == "nccl") {
    for (size_t i = 0; i < params.size(); ++i)
      LOOM_CHECK(params[i].is_cuda(), "DistributedDataParallel: the process group's backend is "
                 "nccl, which takes CUDA tensors only, but parameter \"", param_names_[i],
                 "\" is on ", params[i].device(), "; move the module to this rank's GPU first "
                 "(module->to(Device(kCUDA, local_rank))) or use a gloo group");
  }

  verify_replicas_match(all);
  std::vector<Tensor> state;
  for (const auto& [name, t] : all) state.push_back(t);
  broadcast_coalesced(state, group_, 0);

  const auto bytes = [](double mb) {
    return std::max<size_t>(static_cast<size_t>(mb * 1024.0 * 1024.0), 1);
  };
  const auto assignment = compute_bucket_assignment(params, bytes(options_.first_bucket_cap_mb),
                                                    bytes(options_.bucket_cap_mb));
  reducer_ = std::make_unique<Reducer>(params, param_names_, assignment, group_,
                                       options_.find_unused_parameters,
                                       options_.gradient_as_bucket_view);
}

void DistributedDataParallelImpl::verify_replicas_match(
    const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<int64_t> sig;
  for (const auto& [name, t] : tensors) {
    sig.push_back(static_cast<int64_t>(t.dtype()));
    sig.push_back(t.dim());
    for (int64_t s : t.sizes()) sig.push_back(s);
  }
  const int n = group_->size();
  // On the device the group communicates on (the model's GPU under nccl).
  const Device on = group_->device_for(tensors.empty() ? Device(kCPU) : tensors[0].second.device());
  const TensorOptions longs = TensorOptions(kInt64).device(on);
  Tensor summary = tensor<int64_t>({static_cast<int64_t>(tensors.size()),
                                    static_cast<int64_t>(sig.size()),
                                    static_cast<int64_t>(fnv1a(sig) >> 1)})
                       .to(on);
  Tensor summaries = zeros({n * 3}, longs);
  group_->all_gather_into_tensor(summaries, summary)->wait();
  const std::vector<int64_t> summary_values = summaries.to_vector<int64_t>();
  const int64_t* all = summary_values.data();
  bool same = true;
  int64_t longest = 0;
  for (int r = 0; r < n; ++r) {
    same = same && all[3 * r + 1] == all[1] && all[3 * r + 2] == all[2];
    longest = std::max(longest, all[3 * r + 1]);
  }
  if (same) return;

  // Mismatch: exchange the full signatures (padded) to say where.
  std::vector<int64_t> padded(longest, -1);
  std::copy(sig.begin(), sig.end(), padded.begin());
  Tensor mine = tensor(padded, {longest}, TensorOptions(kInt64)).to(on);
  Tensor every = zeros({n * longest}, longs);
  group_->all_gather_into_tensor(every, mine)->wait();
  const std::vector<int64_t> every_values = every.to_vector<int64_t>();
  const int64_t* data = every_values.data();
  const auto reference = decode(data, all[1]);
  std::ostringstream msg;
  msg << "DistributedDataParallel: the model replicas differ across ranks, so their gradients "
         "cannot be averaged (parameters and buffers are compared in registration order; names "
         "are this rank's, rank "
      << group_->rank() << "):";
  for (int r = 1; r < n; ++r) {
    const auto other = decode(data + r * longest, all[3 * r + 1]);
    if (other.size() != reference.size())
      msg << " rank " << r << " has " << other.size() << " parameters and buffers, rank 0 has "
          << reference.size() << ";";
    for (size_t k = 0; k < std::min(other.size(), reference.size()); ++k) {
      if (other[k].dtype == reference[k].dtype && other[k].sizes == reference[k].sizes) continue;
      msg << " tensor " << k;
      if (k < tensors.size()) msg << " (\"" << tensors[k].first << "\")";
      msg << " is " << entry_str(reference[k]) << " on rank 0 but " << entry_str(other[k])
          << " on rank " << r << ";";
      break;
    }
  }
  msg << " build the same model on every rank";
  throw Error(msg.str());
}

void DistributedDataParallelImpl::pre_forward() {
  if (options_.broadcast_buffers && group_->size() > 1) {
    const auto buffers = module_->buffers();
    if (!buffers.empty()) broadcast_coalesced(buffers, group_, 0);
  }
}

void DistributedDataParallelImpl::post_forward(const std::vector<Tensor>& outputs) {
  if (autograd::GradMode::is_enabled() && require_sync_) {
    reducer_->prepare_for_backward(outputs);
  } else {
    reducer_->disarm();
  }
}

Tensor DistributedDataParallelImpl::forward(const Tensor& input) {
  return forward_with([&] { return module_->forward(input); });
}

std::vector<size_t> DistributedDataParallelImpl::bucket_sizes() const {
  std::vector<size_t> out;
  for (const Bucket& b : reducer_->buckets()) out.push_back(b.nbytes());
  return out;
}

std::vector<std::vector<std::string>> DistributedDataParallelImpl::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : reducer_->buckets()) {
    out.emplace_back();
    for (size_t i : b.params) out.back().push_back(param_names_[i]);
  }
  return out;
}

void DistributedDataParallelImpl::pretty_print(std::ostream& out) const {
  out << "DistributedDataParallel(world_size=" << group_->size() << ", rank=" << group_->rank()
      << ", buckets=" << reducer_->buckets().size() << ")";
}

DistributedDataParallelImpl::NoSyncGuard::NoSyncGuard(DistributedDataParallelImpl* ddp)
    : ddp_(ddp), previous_(ddp->require_sync_) {
  ddp_->require_sync_ = false;
}

DistributedDataParallelImpl::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : ddp_(other.ddp_), previous_(other.previous_) {
  other.ddp_ = nullptr;
}

DistributedDataParallelImpl::NoSyncGuard::~NoSyncGuard() {
  if (ddp_) ddp_->require_sync_ = previous_;
}

void DistributedDataParallelImpl::register_comm_hook(CommHook hook) {
  switch (hook) {
    case CommHook::kAllReduce: reducer_->set_compression(std::nullopt); break;
    case CommHook::kFp16Compress: reducer_->set_compression(kFloat16); break;
    case CommHook::kBf16Compress: reducer_->set_compression(kBFloat16); break;
  }
}

}  // namespace distributed
}  // namespace loom
