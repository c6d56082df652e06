#include "distributed/parallel/SyncBatchNorm.h"

#include <cmath>

#include "autograd/GradMode.h"
#include "autograd/functions/Record.h"
#include "autograd/functions/Shape.h"
#include "distributed/DefaultGroup.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace nn {

using autograd::Node;
using autograd::SavedTensor;
using distributed::ProcessGroupPtr;

namespace {

// The reduction dims of an (N, C, ...) tensor: all but 1.
IntList reduce_dims(const Tensor& x) {
  IntList dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// (C) -> (1, C, 1, ...) to broadcast against x.
Tensor per_channel(const Tensor& v, const Tensor& x) {
  IntList shape(x.dim(), 1);
  shape[1] = v.numel();
  return v.view(shape);
}

// Inputs (input, weight, bias).  grad_input needs the global sums of dy and
// dy * (x - mean); grad_weight and grad_bias are this rank's share.
class SyncBatchNormBackward final : public Node {
 public:
  std::string name() const override { return "SyncBatchNormBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& dy = grads[0];
    const Tensor x = input.unpack(*this);
    const IntList dims = reduce_dims(x);
    const int64_t c = mean.numel();
    const Tensor xmu = x - per_channel(mean, x);
    Tensor sum_dy = dy.sum(dims);          // (C)
    Tensor sum_dy_xmu = (dy * xmu).sum(dims);  // (C)
    Tensor gi, gw, gb;
    if (needs_input_grad(1)) gw = sum_dy_xmu * invstd;
    if (needs_input_grad(2)) gb = sum_dy;
    if (needs_input_grad(0)) {
      // (2C) on the device the group communicates on; copies, not cat (which
      // need not exist for the device).
      Tensor combined = empty({2 * c}, TensorOptions(sum_dy.dtype())
                                           .device(group->device_for(sum_dy.device())));
      combined.narrow(0, 0, c).copy_(sum_dy);
      combined.narrow(0, c, c).copy_(sum_dy_xmu);
      group->all_reduce(combined, distributed::ReduceOp::Sum)->wait();
      combined = combined.to(dy.device());
      const Tensor mean_dy = combined.narrow(0, 0, c) / static_cast<double>(total);
      const Tensor mean_dy_xmu = combined.narrow(0, c, c) / static_cast<double>(total);
      Tensor scale = invstd;
      if (weight.defined()) scale = scale * weight.unpack(*this);
      gi = (dy - per_channel(mean_dy, x) -
            xmu * per_channel(invstd * invstd * mean_dy_xmu, x)) *
           per_channel(scale, x);
    }
    // 16-bit inputs: the float32 results rounded to each input's dtype.
    if (gi.defined() && gi.dtype() != x.dtype()) gi = gi.to(x.dtype());
    if (gw.defined() && gw.dtype() != weight_dtype) gw = gw.to(weight_dtype);
    if (gb.defined() && gb.dtype() != weight_dtype) gb = gb.to(weight_dtype);
    return {gi, gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
    mean = Tensor();
    invstd = Tensor();
  }

  SavedTensor input, weight;
  Tensor mean, invstd;  // (C) global statistics the forward used
  int64_t total = 0;    // values per channel over all ranks
  DType weight_dtype = kFloat32;  // of weight and bias
  ProcessGroupPtr group;
};

}  // namespace

Tensor sync_batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const ProcessGroupPtr& group) {
  LOOM_CHECK(group != nullptr, "sync_batch_norm: the process group is null");
  LOOM_CHECK(input.defined() && input.dim() >= 2, "sync_batch_norm: expected an (N, C, ...) "
             "input, got ", input.defined() ? input.describe() : std::string("undefined"));
  LOOM_CHECK(input.is_floating_point(), "sync_batch_norm: expected a floating input, got ",
             input.describe());
  const int64_t c = input.size(1);
  const IntList dims = reduce_dims(input);
  const int64_t count = c > 0 ? input.numel() / c : 0;

  Tensor mean, invstd;
  double unbiased_scale = 1.0;
  int64_t total = 0;
  {
    autograd::NoGradGuard no_grad;
    // This rank's (count, mean (C), M2 (C)), where M2 = sum of (x - mean)^2.
    Tensor local_mean, local_m2;
    if (count > 0) {
      local_mean = input.mean(dims);
      local_m2 = (input - per_channel(local_mean, input)).pow(2).sum(dims);
    } else {
      local_mean = zeros({c}, TensorOptions(input.dtype()).device(input.device()));
      local_m2 = zeros_like(local_mean);
    }
    // (1 + 2C) on the device the group communicates on (copies, not cat,
    // which need not exist for the device).
    const TensorOptions comm = TensorOptions(kFloat64).device(group->device_for(input.device()));
    Tensor packed = full({1 + 2 * c}, static_cast<double>(count), comm);
    packed.narrow(0, 1, c).copy_(local_mean);
    packed.narrow(0, 1 + c, c).copy_(local_m2);
    const int n = group->size();
    Tensor gathered = zeros({n * (1 + 2 * c)}, comm);
    group->all_gather_into_tensor(gathered, packed)->wait();
    const std::vector<double> g = gathered.to_vector<double>();
    // Merge (Chan et al.): exact for any counts, zero included.
    std::vector<double> m(c, 0.0), m2(c, 0.0);
    double nt = 0;
    for (int r = 0; r < n; ++r) {
      const double* row = g.data() + r * (1 + 2 * c);
      const double nb = row[0];
      if (nb <= 0) continue;
      const double nn = nt + nb;
      for (int64_t k = 0; k < c; ++k) {
        const double delta = row[1 + k] - m[k];
        m[k] += delta * nb / nn;
        m2[k] += row[1 + c + k] + delta * delta * nt * nb / nn;
      }
      nt = nn;
    }
    total = static_cast<int64_t>(nt);
    LOOM_CHECK(total > 1, "SyncBatchNorm: expected more than 1 value per channel when training, "
               "got ", total, " over all ", n, " ranks (this rank's input ",
               shape_str(input.sizes()), ")");
    std::vector<double> var(c), inv(c);
    for (int64_t k = 0; k < c; ++k) {
      var[k] = m2[k] / nt;
      inv[k] = 1.0 / std::sqrt(var[k] + eps);
    }
    // 16-bit inputs normalise in float32 (and round the output once).
    const DType stats = is_reduced_float(input.dtype()) ? kFloat32 : input.dtype();
    mean = tensor(m, {c}, TensorOptions(kFloat64)).to(input.device(), stats);
    invstd = tensor(inv, {c}, TensorOptions(kFloat64)).to(input.device(), stats);
    unbiased_scale = nt / (nt - 1);
    if (running_mean.defined()) {
      Tensor rm = running_mean;
      rm.mul_(1.0 - momentum).add_(mean.to(running_mean.dtype()), momentum);
    }
    if (running_var.defined()) {
      Tensor batch_var = tensor(var, {c}, TensorOptions(kFloat64))
                             .to(running_var.device(), running_var.dtype()) *
                         unbiased_scale;
      Tensor rv = running_var;
      rv.mul_(1.0 - momentum).add_(batch_var, momentum);
    }
  }

  Tensor out;
  {
    autograd::NoGradGuard no_grad;
    out = (input - per_channel(mean, input)) * per_channel(invstd, input);
    if (weight.defined()) out = out * per_channel(weight, input);
    if (bias.defined()) out = out + per_channel(bias, input);
    if (out.dtype() != input.dtype()) out = out.to(input.dtype());
  }
  if (auto node = autograd::record<SyncBatchNormBackward>({input, weight, bias}, {out})) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    node->mean = mean;
    node->invstd = invstd;
    node->total = total;
    node->weight_dtype = weight.defined() ? weight.dtype() : bias.defined() ? bias.dtype() : input.dtype();
    node->group = group;
  }
  return out;
}

SyncBatchNormImpl::SyncBatchNormImpl(BatchNormOptions options, ProcessGroupPtr group)
    : BatchNormBase("SyncBatchNorm", options, {2, 3, 4, 5}), process_group(std::move(group)) {}

Tensor SyncBatchNormImpl::forward(const Tensor& input) {
  if (forward_to) return forward_to->forward(input);
  if (!process_group || !is_training()) return BatchNormBase::forward(input);
  LOOM_CHECK(input.defined() && input.dim() >= 2 && input.dim() <= 5 &&
                 input.size(1) == options.num_features_,
             "SyncBatchNorm(", options.num_features_, "): expected input of shape (N, C, ...) "
             "with 2 to 5 dims and C = ", options.num_features_, ", got ",
             input.defined() ? shape_str(input.sizes()) : std::string("an undefined tensor"));
  double momentum = options.momentum_.value_or(0.0);
  const bool track = options.track_running_stats_;
  if (track) {
    autograd::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    if (!options.momentum_)
      momentum = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  return sync_batch_norm(input, track ? running_mean : Tensor(), track ? running_var : Tensor(),
                         weight, bias, momentum, options.eps_, process_group);
}

void SyncBatchNormImpl::pretty_print(std::ostream& out) const {
  BatchNormBase::pretty_print(out);
  if (process_group) {
    // "SyncBatchNorm(16, eps=..., ...)" plus the group size.
    out << " [world_size=" << process_group->size() << "]";
  }
}

std::shared_ptr<Module> SyncBatchNormImpl::clone(std::optional<Device> device) const {
  auto copy = std::make_shared<SyncBatchNormImpl>(options, process_group);
  std::optional<Device> where = device;
  const auto state = state_dict();
  if (!where && !state.empty()) where = state[0].second.device();
  if (where) copy->to(*where);
  copy->load_state_dict(state, true);
  copy->train(is_training());
  return copy;
}

namespace {

// A SyncBatchNorm sharing bn's tensors; bn forwards to it from now on.
std::shared_ptr<SyncBatchNormImpl> make_sync(const std::shared_ptr<BatchNormBase>& bn,
                                             const ProcessGroupPtr& group) {
  auto sync = std::make_shared<SyncBatchNormImpl>(bn->options, group);
  if (bn->options.affine_) {
    sync->weight = sync->register_parameter("weight", bn->weight, bn->weight.requires_grad());
    sync->bias = sync->register_parameter("bias", bn->bias, bn->bias.requires_grad());
  }
  if (bn->options.track_running_stats_) {
    sync->running_mean = sync->register_buffer("running_mean", bn->running_mean);
    sync->running_var = sync->register_buffer("running_var", bn->running_var);
    sync->num_batches_tracked = sync->register_buffer("num_batches_tracked", bn->num_batches_tracked);
  }
  sync->train(bn->is_training());
  bn->forward_to = sync;
  return sync;
}

bool is_plain_batch_norm(const std::shared_ptr<Module>& m) {
  return std::dynamic_pointer_cast<BatchNorm1dImpl>(m) != nullptr ||
         std::dynamic_pointer_cast<BatchNorm2dImpl>(m) != nullptr;
}

void convert_children(Module& parent, const ProcessGroupPtr& group) {
  for (const auto& [name, child] : parent.named_children()) {
    if (is_plain_batch_norm(child)) {
      auto bn = std::static_pointer_cast<BatchNormBase>(child);
      if (bn->forward_to) {
        // Already converted once: point the old module at the new group too.
        parent.replace_module(name, bn->forward_to);
        if (auto s = std::dynamic_pointer_cast<SyncBatchNormImpl>(bn->forward_to))
          s->process_group = group;
        continue;
      }
      parent.replace_module(name, make_sync(bn, group));
    } else if (auto sync = std::dynamic_pointer_cast<SyncBatchNormImpl>(child)) {
      sync->process_group = group;
    } else {
      convert_children(*child, group);
    }
  }
}

}  // namespace

std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                               ProcessGroupPtr group) {
  LOOM_CHECK(module != nullptr, "convert_sync_batchnorm: the module is null");
  if (!group && distributed::is_initialized()) group = distributed::default_group();
  if (is_plain_batch_norm(module))
    return make_sync(std::static_pointer_cast<BatchNormBase>(module), group);
  if (auto sync = std::dynamic_pointer_cast<SyncBatchNormImpl>(module)) {
    sync->process_group = group;
    return module;
  }
  convert_children(*module, group);
  return module;
}

}  // namespace nn
}  // namespace loom
