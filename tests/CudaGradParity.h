// CPU-vs-CUDA parity of an op's forward AND backward through autograd, for
// the gpu-tagged tests of differentiable ops.
//
// Both checks make two sets of leaves from the same values (on the CPU and on
// the GPU; the chosen inputs require grad), run the op on each, compare the
// outputs, back-propagate the same random weighting of every output,
// sum(out * w), and compare the gradient of every leaf that asked for one.
// Views taken inside the op (transposes, slices, expands) reach the kernels
// as strided operands and their gradients flow back through them.
//
//   GradParity(fn, inputs[, rtol])        every floating input requires grad;
//   GradParityMulti(fn, inputs[, rtol])   several outputs.  Tolerance relative
//     to the largest expected magnitude (GEMM and convolution sums cancel, so
//     elementwise relative error near 0 means nothing): |actual - expected|
//     <= rtol * max(1, max |expected|), rtol 1e-5 for float32 (TF32 off) and
//     1e-11 for float64 unless given.
//   ForwardBackwardParity(fn, inputs, grad[, view, atol32])  grad[i] says
//     which inputs require grad; `view` is applied to every leaf on both
//     devices first (transposed or narrowed layouts); elementwise tolerance of
//     testing_cuda::Parity (CudaTestUtil.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "tests/CudaTestUtil.h"

namespace loom {
namespace testing_cuda {

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;
using ViewFn = std::function<Tensor(const Tensor&)>;
using Compare = std::function<::testing::AssertionResult(const Tensor& actual, const Tensor& expected)>;

inline double default_rtol(DType dtype) { return dtype == kFloat64 ? 1e-11 : 1e-5; }

// actual (on CUDA) against expected (CPU), scaled as above; rtol < 0 means the default.
inline ::testing::AssertionResult CloseScaled(const Tensor& actual, const Tensor& expected,
                                              double rtol = -1) {
  if (!actual.defined() || !expected.defined())
    return actual.defined() == expected.defined()
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << "one of the two tensors is undefined";
  if (!actual.is_cuda())
    return ::testing::AssertionFailure() << "result not on CUDA: " << actual.describe();
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure()
           << actual.describe() << " vs expected " << expected.describe();
  if (rtol < 0) rtol = default_rtol(expected.dtype());
  const std::vector<double> a = actual.cpu().to_vector<double>();
  const std::vector<double> b = expected.to_vector<double>();
  double scale = 1;
  for (double v : b) scale = std::max(scale, std::abs(v));
  const bool exact = !expected.is_floating_point();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;
    if (exact || !(std::abs(a[i] - b[i]) <= rtol * scale))
      return ::testing::AssertionFailure() << "element " << i << " of " << expected.describe()
                                           << ": " << a[i] << " vs expected " << b[i]
                                           << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// The shared core: leaves (inputs[i] requires grad when wants_grad[i]), the
// op on both devices, outputs compared, sum(out * w) back-propagated on both,
// the gradients of the grad-requiring leaves compared.
inline ::testing::AssertionResult ParityThroughAutograd(const MultiFn& fn,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<bool>& wants_grad,
                                                        const ViewFn& view, const Compare& close,
                                                        uint64_t seed) {
  std::vector<Tensor> cpu_leaves, gpu_leaves, cpu_in, gpu_in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor c = inputs[i].detach().clone(), g = inputs[i].detach().to(kGpu);
    if (wants_grad[i]) {
      c.requires_grad_();
      g.requires_grad_();
    }
    cpu_leaves.push_back(c);
    gpu_leaves.push_back(g);
    cpu_in.push_back(view ? view(c) : c);
    gpu_in.push_back(view ? view(g) : g);
  }
  const std::vector<Tensor> cpu_out = fn(cpu_in), gpu_out = fn(gpu_in);
  if (cpu_out.size() != gpu_out.size())
    return ::testing::AssertionFailure() << "different numbers of outputs";
  Tensor cpu_loss, gpu_loss;
  for (size_t i = 0; i < cpu_out.size(); ++i) {
    auto r = close(gpu_out[i].detach(), cpu_out[i].detach());
    if (!r) return ::testing::AssertionFailure() << "output " << i << ": " << r.message();
    if (!cpu_out[i].requires_grad() || cpu_out[i].numel() == 0) continue;
    const Tensor w = sample(cpu_out[i].dtype(), cpu_out[i].sizes(), seed + i, -1.0, 1.0);
    const Tensor lc = (cpu_out[i] * w).sum(), lg = (gpu_out[i] * w.to(kGpu)).sum();
    cpu_loss = cpu_loss.defined() ? cpu_loss + lc : lc;
    gpu_loss = gpu_loss.defined() ? gpu_loss + lg : lg;
  }
  if (!cpu_loss.defined()) return ::testing::AssertionSuccess();
  cpu_loss.backward();
  gpu_loss.backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!wants_grad[i]) continue;
    const Tensor gc = cpu_leaves[i].grad(), gg = gpu_leaves[i].grad();
    if (gc.defined() != gg.defined())
      return ::testing::AssertionFailure() << "grad of input " << i << " defined on one device only";
    if (!gc.defined()) continue;
    auto r = close(gg, gc);
    if (!r) return ::testing::AssertionFailure() << "grad of input " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// fn's outputs and the gradients of its floating inputs agree on CPU and GPU.
inline ::testing::AssertionResult GradParityMulti(const MultiFn& fn,
                                                  const std::vector<Tensor>& inputs,
                                                  double rtol = -1, uint64_t seed = 7) {
  std::vector<bool> wants_grad;
  for (const Tensor& t : inputs) wants_grad.push_back(t.is_floating_point());
  return ParityThroughAutograd(
      fn, inputs, wants_grad, nullptr,
      [rtol](const Tensor& a, const Tensor& e) { return CloseScaled(a, e, rtol); }, seed);
}

// The one-output form.
inline ::testing::AssertionResult GradParity(const OpFn& fn, const std::vector<Tensor>& inputs,
                                             double rtol = -1, uint64_t seed = 7) {
  return GradParityMulti([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; },
                         inputs, rtol, seed);
}

// grad[i]: whether input i requires grad (floating only); view, when given,
// is applied to every leaf on both devices before fn.
inline ::testing::AssertionResult ForwardBackwardParity(const OpFn& fn,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<bool>& grad,
                                                        const ViewFn& view = nullptr,
                                                        double atol32 = 1e-6) {
  std::vector<bool> wants_grad(inputs.size(), false);
  for (size_t i = 0; i < inputs.size() && i < grad.size(); ++i) wants_grad[i] = grad[i];
  return ParityThroughAutograd(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }, inputs,
      wants_grad, view,
      [atol32](const Tensor& a, const Tensor& e) { return Parity(a, e, atol32); }, 4242);
}

}  // namespace testing_cuda
}  // namespace loom
