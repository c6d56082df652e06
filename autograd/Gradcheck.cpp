#include "autograd/Gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/Engine.h"
#include "autograd/GradMode.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace autograd {
namespace {

// Storage offsets (in elements) of each element of t, in row-major order.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> offsets;
  offsets.reserve(t.numel());
  IntList idx(t.dim(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = 0;
    for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
    offsets.push_back(off);
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++idx[d] < t.sizes()[d]) break;
      idx[d] = 0;
    }
  }
  return offsets;
}

std::vector<double> output_values(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                  const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to_vector<double>();
}

}  // namespace

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions options) {
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || !in.requires_grad()) continue;
    LOOM_CHECK(in.dtype() == kFloat64, "gradcheck: input ", i, " is ", in.describe(),
               "; use float64 inputs for finite differences");
    LOOM_CHECK(in.is_cpu(), "gradcheck: input ", i, " must be on the CPU");
    for (int64_t s : in.strides())
      LOOM_CHECK(s != 0 || in.numel() <= 1, "gradcheck: input ", i,
                 " is an expanded view (stride 0); pass a real tensor");
    checked.push_back(i);
  }
  LOOM_CHECK(!checked.empty(), "gradcheck: no input requires grad");

  const Tensor output = fn(inputs);
  LOOM_CHECK(output.requires_grad(), "gradcheck: the output does not require grad ",
             output.describe());
  const int64_t n_out = output.numel();
  std::vector<Tensor> wrt;
  for (size_t i : checked) wrt.push_back(inputs[i]);

  // Analytical: one backward per output element, row j of the Jacobian.
  std::vector<std::vector<std::vector<double>>> analytical(checked.size());
  for (size_t k = 0; k < checked.size(); ++k)
    analytical[k].assign(n_out, std::vector<double>(wrt[k].numel(), 0.0));
  for (int64_t j = 0; j < n_out; ++j) {
    Tensor seed = zeros(output.sizes(), TensorOptions(output.dtype()).device(output.device()));
    {
      Tensor flat = zeros({n_out}, TensorOptions(output.dtype()));
      static_cast<double*>(flat.data_ptr())[j] = 1.0;
      native::copy_(seed, native::to(flat, output.device(), output.dtype()).reshape(output.sizes()));
    }
    std::vector<Tensor> grads = grad({output}, wrt, {seed}, true, false, true);
    for (size_t k = 0; k < wrt.size(); ++k) {
      if (!grads[k].defined()) continue;
      LOOM_CHECK(grads[k].sizes() == wrt[k].sizes(), "gradcheck: gradient of input ",
                 checked[k], " has shape ", shape_str(grads[k].sizes()), " but the input has ",
                 shape_str(wrt[k].sizes()));
      analytical[k][j] = grads[k].to_vector<double>();
    }
  }

  // Numerical: central differences, perturbing each element in place.
  for (size_t k = 0; k < checked.size(); ++k) {
    const Tensor& in = wrt[k];
    double* base = static_cast<double*>(in.storage().data());
    const std::vector<int64_t> offsets = element_offsets(in);
    for (int64_t e = 0; e < in.numel(); ++e) {
      double& x = base[in.storage_offset() + offsets[e]];
      const double orig = x;
      x = orig + options.eps;
      const std::vector<double> plus = output_values(fn, inputs);
      x = orig - options.eps;
      const std::vector<double> minus = output_values(fn, inputs);
      x = orig;
      for (int64_t j = 0; j < n_out; ++j) {
        const double numerical = (plus[j] - minus[j]) / (2 * options.eps);
        const double a = analytical[k][j][e];
        if (std::abs(a - numerical) > options.atol + options.rtol * std::abs(numerical)) {
          LOOM_FAIL("gradcheck: Jacobian mismatch for input ", checked[k], " ", in.describe(),
                    " at input element ", e, ", output element ", j,
                    ": analytical ", a, " vs numerical ", numerical);
        }
      }
    }
  }
  return true;
}

}  // namespace autograd

using autograd::gradcheck;

}  // namespace loom
