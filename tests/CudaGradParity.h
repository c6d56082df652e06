// CPU-vs-CUDA parity of an op's forward AND backward through autograd, for
// the gpu-tagged tests of the GEMM / convolution / normalisation / pooling
// families (tests/tensor/cuda_{gemm,conv,norm_pool}_test.cpp).
//
// GradParity(fn, inputs) (GradParityMulti for several outputs) makes two sets of leaves from the same values -- on
// the CPU and on the GPU, floating inputs requiring grad -- runs fn on each,
// compares the outputs, then back-propagates the same random weighting of
// every output, sum(out * w), and compares the gradient of every leaf.
// Views taken inside fn (transposes, slices, expands) therefore reach the
// kernels as strided operands and their gradients flow back through them.
//
// Tolerance is relative to the largest expected magnitude (GEMM and
// convolution sums cancel, so elementwise relative error near 0 means
// nothing): |actual - expected| <= rtol * max(1, max |expected|), rtol 1e-5
// for float32 (with TF32 off) and 1e-11 for float64 unless given.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <vector>

#include "tests/CudaTestUtil.h"

namespace loom {
namespace testing_cuda {

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

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// fn's outputs and the gradients of its floating inputs agree on CPU and GPU.
inline ::testing::AssertionResult GradParityMulti(const MultiFn& fn,
                                                  const std::vector<Tensor>& inputs,
                                                  double rtol = -1, uint64_t seed = 7) {
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().clone(), g = t.detach().to(kGpu);
    if (t.is_floating_point()) {
      c.requires_grad_();
      g.requires_grad_();
    }
    cpu_in.push_back(c);
    gpu_in.push_back(g);
  }
  const std::vector<Tensor> cpu_out = fn(cpu_in), gpu_out = fn(gpu_in);
  if (cpu_out.size() != gpu_out.size())
    return ::testing::AssertionFailure() << "different numbers of outputs";
  Tensor cpu_loss, gpu_loss;
  for (size_t i = 0; i < cpu_out.size(); ++i) {
    auto r = CloseScaled(gpu_out[i], cpu_out[i], rtol);
    if (!r) return ::testing::AssertionFailure() << "output " << i << ": " << r.message();
    if (!cpu_out[i].requires_grad() || cpu_out[i].numel() == 0) continue;
    const Tensor w = sample(cpu_out[i].dtype(), cpu_out[i].sizes(), seed + i);
    const Tensor lc = (cpu_out[i] * w).sum(), lg = (gpu_out[i] * w.to(kGpu)).sum();
    cpu_loss = cpu_loss.defined() ? cpu_loss + lc : lc;
    gpu_loss = gpu_loss.defined() ? gpu_loss + lg : lg;
  }
  if (!cpu_loss.defined()) return ::testing::AssertionSuccess();
  cpu_loss.backward();
  gpu_loss.backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_floating_point()) continue;
    const Tensor gc = cpu_in[i].grad(), gg = gpu_in[i].grad();
    if (gc.defined() != gg.defined())
      return ::testing::AssertionFailure() << "grad of input " << i << " defined on one device only";
    if (!gc.defined()) continue;
    auto r = CloseScaled(gg, gc, rtol);
    if (!r) return ::testing::AssertionFailure() << "grad of input " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// The one-output form.
inline ::testing::AssertionResult GradParity(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
    double rtol = -1, uint64_t seed = 7) {
  return GradParityMulti(MultiFn([&](const std::vector<Tensor>& in) {
                      return std::vector<Tensor>{fn(in)};
                    }),
                    inputs, rtol, seed);
}

}  // namespace testing_cuda
}  // namespace loom
