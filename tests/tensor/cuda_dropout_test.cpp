// CUDA dropout (tensor/cuda/Dropout.cu, Philox4x32-10): the mask is not the
// CPU's (different bit source), so instead of CPU parity this checks what
// dropout must guarantee: the keep rate is 1 - p, kept values are scaled by
// 1 / (1 - p), the mask is a pure function of the generator state (same seed,
// same mask; another seed, another mask), the backward multiplies by that
// same mask, and activation checkpointing's recomputation draws it again.
// Odd sizes (not a multiple of four), float64, transposed inputs, p = 0, p =
// 1 and empty tensors.  Tagged gpu; every case skips itself where no GPU is
// visible.
#include <cmath>
#include <vector>

#include "autograd/Checkpoint.h"
#include "tensor/native/Dropout.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::kGpu;
using testing_cuda::Parity;
using testing_cuda::sample;

class CudaDropout : public testing_cuda::CudaTest {};

TEST_F(CudaDropout, KeepRateScaleAndOutput) {
  for (DType dtype : {kFloat32, kFloat64})
    for (double p : {0.1, 0.5, 0.9}) {
      const Tensor x = sample(dtype, {1001, 999}, 1).to(kGpu);  // odd: a tail group
      Generator gen(7);
      const auto [out, mask] = native::dropout(x, p, &gen);
      const std::vector<double> m = mask.to_vector<double>();
      const double scale = static_cast<double>(dtype == kFloat32
                                                   ? static_cast<double>(static_cast<float>(1 / (1 - p)))
                                                   : 1 / (1 - p));
      int64_t kept = 0;
      for (double v : m) {
        ASSERT_TRUE(v == 0 || v == scale) << v;
        kept += v != 0;
      }
      EXPECT_NEAR(static_cast<double>(kept) / m.size(), 1 - p, 0.003) << "p " << p;
      EXPECT_TRUE(Parity(out, (x * mask).cpu()));
    }
}

TEST_F(CudaDropout, MaskIsAPureFunctionOfTheGeneratorState) {
  const Tensor x = ones({37, 5}, kGpu);
  Generator a(123), b(123), c(124);
  const Tensor ma = std::get<1>(native::dropout(x, 0.5, &a));
  const Tensor mb = std::get<1>(native::dropout(x, 0.5, &b));
  const Tensor mc = std::get<1>(native::dropout(x, 0.5, &c));
  EXPECT_EQ(ma.to_vector<float>(), mb.to_vector<float>());
  EXPECT_NE(ma.to_vector<float>(), mc.to_vector<float>());
  // The generator advanced by one draw: the next mask differs.
  const Tensor ma2 = std::get<1>(native::dropout(x, 0.5, &a));
  EXPECT_NE(ma.to_vector<float>(), ma2.to_vector<float>());
}

TEST_F(CudaDropout, BackwardUsesTheSameMask) {
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = sample(dtype, {6, 7}, 2).to(kGpu);
    x.requires_grad_();
    Generator gen(9);
    const Tensor y = dropout(x.t(), 0.3, true, &gen);  // transposed input
    const Tensor g = sample(dtype, {7, 6}, 3).to(kGpu);
    y.backward(g);
    const Tensor mask = y.detach().ne(0).to(dtype) * (1 / 0.7);
    EXPECT_TRUE(Parity(x.grad(), (g * mask).t().cpu(), 1e-6));
  }
}

TEST_F(CudaDropout, CheckpointRecomputationDrawsTheSameMask) {
  Tensor w = sample(kFloat32, {8}, 4).to(kGpu);
  w.requires_grad_();
  const Tensor x = sample(kFloat32, {16, 8}, 5).to(kGpu);
  auto fn = [&](const Tensor& in) { return dropout(in * w, 0.5, true); };
  manual_seed(77);
  const Tensor direct = autograd::checkpoint(fn, x, {w});
  direct.sum().backward();
  const Tensor grad = w.grad().cpu();
  // The checkpointed output's zeros are exactly where the gradient has none:
  // w's gradient is the column sums of x over kept positions.
  const Tensor kept = direct.detach().ne(0).to(kFloat32) * 2.0f;
  EXPECT_TRUE(Parity((x * kept).sum({0}), grad, 1e-5));
}

TEST_F(CudaDropout, EdgeCases) {
  const Tensor x = sample(kFloat32, {5}, 6).to(kGpu);
  EXPECT_TRUE(Parity(dropout(x, 0.0, true), x.cpu()));   // identity
  EXPECT_TRUE(Parity(dropout(x, 0.5, false), x.cpu()));  // eval
  EXPECT_TRUE(Parity(dropout(x, 1.0, true), zeros({5})));
  EXPECT_EQ(dropout(empty({0, 3}, kGpu), 0.5, true).numel(), 0);
  EXPECT_LOOM_ERROR(native::dropout(ones({2}, TensorOptions(kInt64).device(kGpu)), 0.5, nullptr),
                    "floating-point");
}

}  // namespace
}  // namespace loom
