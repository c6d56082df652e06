// The GPU's fused batch norm + ReLU (and batch norm + residual add + ReLU)
// against batch norm, `+` and ReLU run as separate ops on the GPU, for
// cuda_norm_pool_test (NCHW) and cuda_batch_norm_channels_last_test
// (channels last): the output, the running statistics and every gradient
// (the residual's too) must be the same bits.
#pragma once

#include <string>
#include <vector>

#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing_cuda {

// One case: activations of `shape` in dtype d laid out as `format` (the
// input, the residual and the output's gradient), float32 (float64 for
// float64) parameters and statistics.  The outputs' layouts must agree too.
inline ::testing::AssertionResult FusedBatchNormIsTheSeparateOps(DType d, const IntList& shape,
                                                                 bool training, bool add,
                                                                 MemoryFormat format) {
  const DType stats = native::batch_norm_stats_dtype(d);
  const int64_t C = shape[1];
  const auto on_gpu = [&](uint64_t seed) {
    return sample(kFloat32, shape, seed).to(d).to(kGpu).contiguous(format);
  };
  const Tensor x0 = on_gpu(41), r0 = on_gpu(42), go = on_gpu(43);
  // A leaf of its own for each run, laid out as `format`.
  const auto leaf = [&](const Tensor& t) {
    Tensor l = empty(t.sizes(), TensorOptions(t.dtype()).device(t.device()), format);
    l.copy_(t);
    return l.requires_grad_();
  };
  Tensor outs[2], rms[2];
  std::vector<Tensor> grads[2];
  for (int fused = 0; fused < 2; ++fused) {
    const Tensor x = leaf(x0), r = leaf(r0);
    const Tensor w = (sample(stats, {C}, 44) + 1.0).to(kGpu).requires_grad_();
    const Tensor b = sample(stats, {C}, 45).to(kGpu).requires_grad_();
    Tensor rm = full({C}, 0.1, TensorOptions(stats).device(kGpu));
    Tensor rv = ones({C}, TensorOptions(stats).device(kGpu));
    if (fused) {
      outs[1] = add ? batch_norm_add_relu(x, r, rm, rv, w, b, training, 0.1, 1e-5)
                    : batch_norm_relu(x, rm, rv, w, b, training, 0.1, 1e-5);
    } else {
      const Tensor bn = batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
      outs[0] = (add ? bn + r : bn).relu();
    }
    outs[fused].backward(go);
    rms[fused] = rm;
    grads[fused] = {x.grad(), w.grad(), b.grad()};
    if (add) grads[fused].push_back(r.grad());
  }
  if (outs[1].sizes() != outs[0].sizes() || outs[1].dtype() != d ||
      outs[1].strides() != outs[0].strides())
    return ::testing::AssertionFailure()
           << "fused " << outs[1].describe() << " vs separate " << outs[0].describe();
  if (auto r = testing::AllClose(rms[1].cpu(), rms[0].cpu(), 0, 0); !r)
    return ::testing::AssertionFailure() << "running mean: " << r.message();
  if (auto r = testing::AllClose(outs[1].cpu(), outs[0].cpu(), 0, 0); !r)
    return ::testing::AssertionFailure() << "output: " << r.message();
  for (size_t i = 0; i < grads[0].size(); ++i) {
    if (grads[1][i].sizes() != grads[0][i].sizes())
      return ::testing::AssertionFailure() << "gradient " << i << ": " << grads[1][i].describe()
                                           << " vs " << grads[0][i].describe();
    if (auto r = testing::AllClose(grads[1][i].cpu(), grads[0][i].cpu(), 0, 0); !r)
      return ::testing::AssertionFailure() << "gradient " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing_cuda
}  // namespace loom
