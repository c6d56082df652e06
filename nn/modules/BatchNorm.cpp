#include "nn/modules/BatchNorm.h"

#include "autograd/Checkpoint.h"
#include "autograd/GradMode.h"
#include "autograd/functions/Normalization.h"
#include "nn/Init.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {

BatchNormBase::BatchNormBase(std::string type_name, BatchNormOptions options_,
                             std::vector<int64_t> expected_dims)
    : Module(std::move(type_name)), options(options_), expected_dims_(std::move(expected_dims)) {
  LOOM_CHECK(options.num_features_ > 0, this->type_name(),
             ": num_features must be positive, got ", options.num_features_);
  reset_parameters();
}

void BatchNormBase::reset_parameters() {
  clear_registrations();
  const int64_t c = options.num_features_;
  if (options.affine_) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  } else {
    weight = bias = Tensor();
  }
  if (options.track_running_stats_) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  } else {
    running_mean = running_var = num_batches_tracked = Tensor();
  }
}

void BatchNormBase::reset_running_stats() {
  if (!options.track_running_stats_) return;
  autograd::NoGradGuard no_grad;
  native::fill_(running_mean, 0);
  native::fill_(running_var, 1);
  native::fill_(num_batches_tracked, 0);
}

Tensor BatchNormBase::forward(const Tensor& input) { return run(input, false); }

Tensor BatchNormBase::forward_relu(const Tensor& input) { return run(input, true); }

Tensor BatchNormBase::forward_add_relu(const Tensor& input, const Tensor& residual) {
  LOOM_CHECK(residual.defined(), type_name(), ": forward_add_relu: the residual is undefined");
  return run(input, true, residual);
}

Tensor BatchNormBase::run(const Tensor& input, bool relu, const Tensor& residual) {
  if (forward_to) {
    Tensor out = forward_to->forward(input);
    if (residual.defined()) out = out + residual;
    return relu ? out.relu() : out;
  }
  LOOM_CHECK(input.defined(), type_name(), ": the input is undefined");
  bool rank_ok = false;
  for (int64_t d : expected_dims_) rank_ok = rank_ok || input.dim() == d;
  LOOM_CHECK(rank_ok && input.size(1) == options.num_features_, type_name(), "(",
             options.num_features_, "): expected input of shape ",
             expected_dims_.size() == 1 ? "(N, C, H, W)" : "(N, C) or (N, C, L)", " with C = ",
             options.num_features_, ", got ", shape_str(input.sizes()));
  double momentum = options.momentum_.value_or(0.0);
  const bool use_batch_stats = is_training() || !options.track_running_stats_;
  // A checkpointed forward being recomputed in backward already updated the
  // running statistics the first time.
  const bool update =
      is_training() && options.track_running_stats_ && !autograd::is_recomputing();
  if (update) {
    autograd::NoGradGuard no_grad;
    // Counted on the device: no host sync unless the cumulative average needs it.
    native::binary_(native::binary_op<optable::Add>(), num_batches_tracked,
                    native::wrap_scalar(1, num_batches_tracked));
    if (!options.momentum_)
      momentum = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  const Tensor rm = update || !use_batch_stats ? running_mean : Tensor();
  const Tensor rv = update || !use_batch_stats ? running_var : Tensor();
  if (residual.defined())
    return batch_norm_add_relu(input, residual, rm, rv, weight, bias, use_batch_stats, momentum,
                               options.eps_);
  if (relu)
    return batch_norm_relu(input, rm, rv, weight, bias, use_batch_stats, momentum, options.eps_);
  return batch_norm(input, rm, rv, weight, bias, use_batch_stats, momentum, options.eps_);
}

void BatchNormBase::pretty_print(std::ostream& out) const {
  out << type_name() << "(" << options.num_features_ << ", eps=" << options.eps_
      << ", momentum=";
  if (options.momentum_) out << *options.momentum_;
  else out << "None";
  out << ", affine=" << (options.affine_ ? "true" : "false")
      << ", track_running_stats=" << (options.track_running_stats_ ? "true" : "false") << ")";
}

namespace {
template <typename Impl>
std::shared_ptr<Module> clone_batch_norm(const Impl& self, std::optional<Device> device) {
  auto copy = std::make_shared<Impl>(self.options);
  std::optional<Device> where = device;
  const auto state = self.state_dict();
  if (!where && !state.empty()) where = state[0].second.device();
  if (where) copy->to(*where);
  copy->load_state_dict(state, true);
  copy->train(self.is_training());
  return copy;
}
}  // namespace

BatchNorm1dImpl::BatchNorm1dImpl(BatchNormOptions options)
    : BatchNormBase("BatchNorm1d", options, {2, 3}) {}
std::shared_ptr<Module> BatchNorm1dImpl::clone(std::optional<Device> device) const {
  return clone_batch_norm(*this, device);
}

BatchNorm2dImpl::BatchNorm2dImpl(BatchNormOptions options)
    : BatchNormBase("BatchNorm2d", options, {4}) {}
std::shared_ptr<Module> BatchNorm2dImpl::clone(std::optional<Device> device) const {
  return clone_batch_norm(*this, device);
}

}  // namespace nn
}  // namespace loom
