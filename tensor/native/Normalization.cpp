#include "tensor/native/Normalization.h"

#include <cmath>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/cpu/Normalization.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {
namespace {

cpu::BatchNormShape bn_shape(const Tensor& input) {
  cpu::BatchNormShape s;
  s.batch = input.size(0);
  s.channels = input.size(1);
  s.spatial = 1;
  for (int64_t d = 2; d < input.dim(); ++d) s.spatial *= input.size(d);
  return s;
}

// A per-channel parameter or statistic: undefined, or C values of input's dtype.
void check_channel_tensor(const Tensor& input, const Tensor& t, const char* name) {
  if (!t.defined()) return;
  check_same_device("batch_norm", input, "input", t, name);
  const int64_t C = input.size(1);
  LOOM_CHECK(t.numel() == C && t.dim() <= 1, "batch_norm: expected ", name, " of shape [", C,
             "] for input ", shape_str(input.sizes()), " (C = ", C, " channels), got ",
             shape_str(t.sizes()));
  LOOM_CHECK(t.dtype() == input.dtype(), "batch_norm: expected ", name, " of dtype ",
             dtype_name(input.dtype()), ", got ", t.describe());
}

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& input, const Tensor& running_mean,
                                              const Tensor& running_var, const Tensor& weight,
                                              const Tensor& bias, bool training, double momentum,
                                              double eps) {
  check_defined("batch_norm", input, "input");
  LOOM_CHECK(input.dim() >= 2,
             "batch_norm: expected input of shape (N, C, ...) with at least 2 dims, got ",
             input.describe());
  LOOM_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64,
             "batch_norm: expected a float32 or float64 input, got ", input.describe());
  check_kernel_device("batch_norm", input);
  check_channel_tensor(input, weight, "weight");
  check_channel_tensor(input, bias, "bias");
  check_channel_tensor(input, running_mean, "running_mean");
  check_channel_tensor(input, running_var, "running_var");
  LOOM_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: running_mean and running_var must both be given or both be undefined");
  LOOM_CHECK(training || running_mean.defined(),
             "batch_norm: running_mean and running_var must be defined in evaluation mode");
  const cpu::BatchNormShape s = bn_shape(input);
  const int64_t count = s.batch * s.spatial;
  LOOM_CHECK(!training || count > 1,
             "batch_norm: Expected more than 1 value per channel when training, got input size ",
             shape_str(input.sizes()));
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  const Tensor x = contiguous(input);
  Tensor out = empty(input.sizes(), options);
  Tensor save_mean = empty({s.channels}, options);
  Tensor save_invstd = empty({s.channels}, options);
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const Tensor b = bias.defined() ? contiguous(bias) : Tensor();
  if (input.is_cuda()) {
    cuda::batch_norm_kernel(x, w, b, running_mean, running_var, training, momentum, eps, out,
                            save_mean, save_invstd);
    return {out, save_mean, save_invstd};
  }
  dispatch_floating(input.dtype(), "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* mean = static_cast<T*>(save_mean.data_ptr());
    T* invstd = static_cast<T*>(save_invstd.data_ptr());
    if (training) {
      std::vector<T> var(s.channels);
      cpu::batch_norm_train_forward<T>(s, cptr<T>(x), cptr<T>(w), cptr<T>(b), eps,
                                       static_cast<T*>(out.data_ptr()), mean, var.data(), invstd);
      if (running_mean.defined()) {
        // running = (1 - momentum) * running + momentum * batch (variance unbiased).
        Tensor rm = contiguous(running_mean), rv = contiguous(running_var);
        T* pm = static_cast<T*>(rm.data_ptr());
        T* pv = static_cast<T*>(rv.data_ptr());
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        for (int64_t c = 0; c < s.channels; ++c) {
          pm[c] = static_cast<T>((1 - momentum) * pm[c] + momentum * mean[c]);
          pv[c] = static_cast<T>((1 - momentum) * pv[c] + momentum * var[c] * unbias);
        }
        if (!rm.is_same(running_mean)) copy_(running_mean, rm);
        if (!rv.is_same(running_var)) copy_(running_var, rv);
        running_mean.bump_version();
        running_var.bump_version();
      }
    } else {
      const Tensor rm = contiguous(running_mean), rv = contiguous(running_var);
      const T* pm = cptr<T>(rm);
      const T* pv = cptr<T>(rv);
      for (int64_t c = 0; c < s.channels; ++c) {
        mean[c] = pm[c];
        invstd[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(pv[c]) + eps));
      }
      cpu::batch_norm_apply<T>(s, cptr<T>(x), mean, invstd, cptr<T>(w), cptr<T>(b),
                               static_cast<T*>(out.data_ptr()));
    }
  });
  return {out, save_mean, save_invstd};
}

void batch_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                         Tensor& grad_weight, Tensor& grad_bias) {
  LOOM_CHECK(grad_output.sizes() == input.sizes(),
             "batch_norm_backward: expected grad_output of shape ", shape_str(input.sizes()),
             ", got ", grad_output.describe());
  const cpu::BatchNormShape s = bn_shape(input);
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  const Tensor go = contiguous(to(grad_output, input.device(), input.dtype()));
  const Tensor x = contiguous(input);
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  if (need_input) grad_input = empty(input.sizes(), options);
  if (need_weight) grad_weight = empty({s.channels}, options);
  if (need_bias) grad_bias = empty({s.channels}, options);
  if (!need_input && !need_weight && !need_bias) return;
  if (input.is_cuda()) {
    cuda::batch_norm_backward_kernel(go, x, w, contiguous(save_mean), contiguous(save_invstd),
                                     training, need_input ? grad_input : Tensor(),
                                     need_weight ? grad_weight : Tensor(),
                                     need_bias ? grad_bias : Tensor());
    return;
  }
  dispatch_floating(input.dtype(), "batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto out = [](bool need, const Tensor& t) {
      return need ? static_cast<T*>(t.data_ptr()) : nullptr;
    };
    cpu::batch_norm_backward<T>(s, cptr<T>(go), cptr<T>(x), cptr<T>(save_mean),
                                cptr<T>(save_invstd), cptr<T>(w), training,
                                out(need_input, grad_input), out(need_weight, grad_weight),
                                out(need_bias, grad_bias));
  });
}

}  // namespace native
}  // namespace loom
