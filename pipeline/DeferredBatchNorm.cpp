#include "pipeline/DeferredBatchNorm.h"

#include "autograd/Checkpoint.h"
#include "autograd/GradMode.h"
#include "autograd/functions/Functions.h"
#include "tensor/Error.h"

namespace loom {
namespace pipeline {

DeferredBatchNormImpl::DeferredBatchNormImpl(nn::BatchNormBase* bn)
    : nn::Module("DeferredBatchNorm"), bn_(bn) {
  LOOM_CHECK(bn_ != nullptr, "DeferredBatchNorm: no BatchNorm layer given");
}

void DeferredBatchNormImpl::begin(int64_t micro_batches) {
  expected_ = micro_batches;
  seen_ = 0;
  count_ = 0;
  mean_ = Tensor();
  m2_ = Tensor();
}

Tensor DeferredBatchNormImpl::forward(const Tensor& input) {
  nn::BatchNormBase& bn = *bn_;
  const auto& o = bn.options;
  if (expected_ <= 0 || !bn.is_training() || !o.track_running_stats_ ||
      autograd::is_recomputing()) {
    // Plain BatchNorm (BatchNormBase::forward, without coming back here); a
    // checkpointed stage's recomputation leaves the running statistics be.
    auto saved = bn.forward_to;
    bn.forward_to = nullptr;
    struct Restore {
      nn::BatchNormBase& bn;
      std::shared_ptr<nn::Module> saved;
      ~Restore() { bn.forward_to = saved; }
    } restore{bn, saved};
    return bn.forward(input);
  }
  LOOM_CHECK(input.defined() && input.dim() >= 2 && input.size(1) == o.num_features_,
             bn.type_name(), "(", o.num_features_, ") in a pipe: expected (N, C, ...) input with C = ",
             o.num_features_, ", got ", input.defined() ? input.describe() : "(undefined)");
  // Normalise with this micro-batch's statistics; leave the running ones.
  Tensor out = batch_norm(input, Tensor(), Tensor(), bn.weight, bn.bias, true, 0.0, o.eps_);
  {
    NoGradGuard no_grad;
    const int64_t c = o.num_features_;
    Tensor x = input.detach().to(kFloat64).transpose(0, 1).reshape({c, -1});  // (C, rows)
    const double n = static_cast<double>(x.size(1));
    Tensor mean = x.mean({1});                        // (C)
    Tensor m2 = x.var({1}, /*unbiased=*/false) * n;   // (C)
    if (!mean_.defined()) {
      mean_ = mean;
      m2_ = m2;
    } else {
      Tensor delta = mean - mean_;
      const double total = count_ + n;
      mean_ = mean_ + delta * (n / total);
      m2_ = m2_ + m2 + delta * delta * (count_ * n / total);
    }
    count_ += n;
    if (++seen_ == expected_) {
      bn.num_batches_tracked.copy_(bn.num_batches_tracked + 1);
      const double momentum =
          o.momentum_ ? *o.momentum_
                      : 1.0 / static_cast<double>(bn.num_batches_tracked.item<int64_t>());
      const DType dtype = bn.running_mean.dtype();
      const Device device = bn.running_mean.device();
      Tensor var = m2_ / std::max(count_ - 1.0, 1.0);
      bn.running_mean.copy_(bn.running_mean * (1.0 - momentum) +
                            mean_.to(device, dtype) * momentum);
      bn.running_var.copy_(bn.running_var * (1.0 - momentum) + var.to(device, dtype) * momentum);
      begin(expected_);  // ready for the next mini-batch
    }
  }
  return out;
}

}  // namespace pipeline
}  // namespace loom
