// float16 and bfloat16 on CUDA against the CPU as the oracle: the
// conversions (every one of the 65,536 patterns of each type widened, and
// float32 inputs with every rounding tie and overflow edge narrowed) bit for
// bit; every op of the unary and binary tables (computed in float32 inside,
// rounded once, on both devices: equal, or within one unit in the last place
// where the two devices' float32 exp/log/tanh differ); reductions, which
// accumulate in float32; the ops that compute 16-bit inputs in float32
// (softmax, norms, dropout, embedding, average pooling, index ops) giving the
// GPU's float32 result rounded once (tests/HalfRounding.h, as on the CPU);
// batch norm on 16-bit activations as they are; and GradScaler's trajectory
// with injected inf and NaN gradients on the GPU equal to the CPU's.  Tagged
// gpu; every case skips itself where no GPU is visible.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/CudaMemory.h"
#include "tensor/native/AmpUnscale.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Normalization.h"
#include "tensor/native/Unary.h"
#include "tests/CudaTestUtil.h"
#include "tests/GradScalerScript.h"
#include "tests/HalfRounding.h"

namespace loom {
namespace {

using native::BinaryOp;
using native::UnaryOp;
using testing::kHalfDTypes;
using testing_cuda::kGpu;

class CudaHalf : public testing_cuda::CudaTest {};

// A CPU tensor of dtype (2 or 4 bytes per element) holding these bits.
template <typename Bits>
Tensor from_bits(const std::vector<Bits>& bits, DType dtype) {
  Tensor t = empty({static_cast<int64_t>(bits.size())}, dtype);
  std::memcpy(t.data_ptr(), bits.data(), bits.size() * sizeof(Bits));
  return t;
}

template <typename Bits>
std::vector<Bits> bits_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  std::vector<Bits> out(c.numel());
  std::memcpy(out.data(), c.data_ptr(), out.size() * sizeof(Bits));
  return out;
}

// Equal bits, any NaN equal to any NaN.
template <typename Bits>
::testing::AssertionResult SameBits(const Tensor& got, const Tensor& want) {
  const auto a = bits_of<Bits>(got), b = bits_of<Bits>(want);
  const auto av = got.cpu().to(kFloat64).to_vector<double>();
  const auto bv = want.cpu().to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(av[i]) && std::isnan(bv[i]))) continue;
    return ::testing::AssertionFailure() << "element " << i << ": 0x" << std::hex << a[i]
                                         << " vs 0x" << b[i];
  }
  return ::testing::AssertionSuccess();
}

TEST_F(CudaHalf, EveryBitPatternWidensAsOnTheCpu) {
  std::vector<uint16_t> patterns(65536);
  for (uint32_t i = 0; i < 65536; ++i) patterns[i] = static_cast<uint16_t>(i);
  for (DType d : kHalfDTypes) {
    const Tensor host = from_bits(patterns, d);
    EXPECT_TRUE(SameBits<uint32_t>(host.to(kGpu).to(kFloat32), host.to(kFloat32))) << dtype_name(d);
    EXPECT_TRUE(SameBits<uint16_t>(host.to(kGpu), host)) << dtype_name(d) << " round trip";
  }
}

TEST_F(CudaHalf, Float32NarrowsAsOnTheCpu) {
  std::vector<uint32_t> inputs;
  // Every bfloat16 tie and its neighbours, float16 ties across its range,
  // overflow edges, infinities and NaNs, then random bits.
  for (uint32_t hi = 0; hi < 65536; hi += 3)
    for (uint32_t lo : {0x7FFFu, 0x8000u, 0x8001u}) inputs.push_back((hi << 16) | lo);
  for (uint32_t e = 0x33000000u; e < 0x47800000u; e += 0x00100000u)
    for (uint32_t m : {0x0FFFu, 0x1000u, 0x1001u, 0x3000u}) inputs.push_back(e | m);
  for (uint32_t v : {0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x477FF000u, 0x477FEFFFu})
    inputs.push_back(v);
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    inputs.push_back(static_cast<uint32_t>(state >> 32));
  }
  const Tensor host = from_bits(inputs, kFloat32);
  for (DType d : kHalfDTypes)
    EXPECT_TRUE(SameBits<uint16_t>(host.to(kGpu).to(d), host.to(d))) << dtype_name(d);
}

// Within one unit in the last place of dtype (exactly equal for the ops
// whose float32 results agree on both devices, which is most).
::testing::AssertionResult WithinOneUlp(const Tensor& got, const Tensor& want, DType dtype) {
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << got.describe() << " vs " << want.describe();
  const double ulp = dtype == kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
  const auto a = got.cpu().to(kFloat64).to_vector<double>();
  const auto b = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    if (std::abs(a[i] - b[i]) <= ulp * std::max(std::abs(b[i]), 6.2e-5)) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

Tensor sample(DType d, IntList sizes, uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  return (rand(sizes, kFloat32, &gen) * (hi - lo) + lo).to(d);
}

TEST_F(CudaHalf, EveryTableOpMatchesTheCpu) {
  for (DType d : kHalfDTypes) {
    const Tensor x = sample(d, {37, 29}, 1, -3, 3), y = sample(d, {29}, 2, 0.5, 3);
    optable::for_each_op(optable::UnaryOpList{}, [&](auto tag) {
      const UnaryOp op = native::unary_op<typename decltype(tag)::type>();
      const Tensor want = native::unary(op, x);
      EXPECT_TRUE(WithinOneUlp(native::unary(op, x.to(kGpu)), want, d))
          << native::unary_op_name(op) << " " << dtype_name(d);
      EXPECT_TRUE(WithinOneUlp(native::unary_backward(op, y.expand({37, 29}).to(kGpu), x.to(kGpu)),
                               native::unary_backward(op, y.expand({37, 29}), x), d))
          << native::unary_op_name(op) << " backward " << dtype_name(d);
    });
    optable::for_each_op(optable::BinaryOpList{}, [&](auto tag) {
      const BinaryOp op = native::binary_op<typename decltype(tag)::type>();
      EXPECT_TRUE(WithinOneUlp(native::binary(op, x.to(kGpu), y.to(kGpu)), native::binary(op, x, y),
                               native::is_comparison(op) ? kFloat32 : d))
          << native::binary_op_name(op) << " " << dtype_name(d);
    });
  }
}

// The elementwise kernels take 16-bit tensors as they are: the results are
// those of the float32 path (the operands widened, one rounding), bit for
// bit, with float32 scalars (a CPU scalar by value, a 0-dim device tensor)
// and full float32 operands beside them, in place and out of place, and no
// float32 copy is made (the peak grows by the 16-bit output only).
TEST_F(CudaHalf, ElementwiseOpsRunSixteenBitTensorsAsTheyAre) {
  using testing::half_sample;
  using testing::widened;
  for (DType d : kHalfDTypes) {
    SCOPED_TRACE(dtype_name(d));
    EXPECT_TRUE(native::elementwise_takes(kGpu, d));
    const Tensor x = half_sample(d, {33, 40}, 31, kGpu), y = half_sample(d, {40}, 32, kGpu);
    const Tensor f32 = half_sample(kFloat32, {33, 40}, 33, kGpu);
    // A 0-dim float32 device tensor whose value is not 16-bit exact.
    const Tensor zero_dim = full({}, 0.3, TensorOptions(kFloat32).device(kGpu));
    const auto same = [&](const Tensor& got, const Tensor& from_float32) {
      EXPECT_EQ(got.dtype(), d);
      EXPECT_TRUE(testing::SameValues(got, from_float32.to(d)));
    };
    const BinaryOp add = native::binary_op<optable::Add>(), mul = native::binary_op<optable::Mul>();
    same(native::binary(add, x, y, 0.5), native::binary(add, widened(x), widened(y), 0.5));
    same(native::binary(mul, x, native::scalar_operand(0.1, x)),
         native::binary(mul, widened(x), native::scalar_operand(0.1, widened(x))));
    same(native::binary(mul, zero_dim, x), native::binary(mul, zero_dim, widened(x)));
    same(native::binary(add, x, f32.to(kBool)), native::binary(add, widened(x), f32.to(kBool)));
    Tensor inplace = x.clone();
    native::binary_(mul, inplace, y);
    same(inplace, native::binary(mul, widened(x), widened(y)));
    Tensor inplace_f32 = x.clone();  // a full float32 other: the (16-bit, float32) kernel
    native::binary_(add, inplace_f32, f32, 0.5);
    same(inplace_f32, native::binary(add, widened(x), f32, 0.5));
    Tensor inplace_scalar = x.clone();  // a CPU scalar by value
    native::binary_(mul, inplace_scalar, native::scalar_operand(0.3, x));
    same(inplace_scalar, native::binary(mul, widened(x), native::scalar_operand(0.3, widened(x))));
    const UnaryOp relu = native::unary_op<optable::Relu>(), exp = native::unary_op<optable::Exp>();
    same(native::unary(exp, x), native::unary(exp, widened(x)));
    Tensor relu_inplace = x.clone();
    native::unary_(relu, relu_inplace);
    same(relu_inplace, native::unary(relu, widened(x)));
    same(native::unary_backward(relu, y.expand({33, 40}), x),
         native::unary_backward(relu, widened(y).expand({33, 40}), widened(x)));
    // 4 M elements: a float32 copy of one operand alone would add 16 MB.
    const Tensor big = half_sample(d, {16, 64, 64, 64}, 35, kGpu);
    cuda::synchronize();
    cuda::reset_peak_memory_stats(kGpu.index);
    const int64_t before = cuda::memory_allocated(kGpu.index);
    {
      const Tensor r = native::unary(relu, big);
      const Tensor sum = native::binary(add, r, big);
      const Tensor g = native::unary_backward(relu, sum, r);
      cuda::synchronize();
    }
    const int64_t grown = cuda::max_memory_allocated(kGpu.index) - before;
    EXPECT_LE(grown, 3 * big.numel() * 2 + (int64_t(2) << 20))
        << "peak grew by " << grown << " bytes for " << big.numel() << " 16-bit elements";
  }
}

// GradScaler's fused unscale (native::amp_unscale_) on the GPU: the CPU's
// values bit for bit for every gradient dtype.  52 float32 gradients (more
// than a launch's 48), one of them 321 chunks of 64K elements (more than a
// launch's 320 blocks, so it is split across launches), an empty one, then
// the other dtypes; the flag set by an inf in a later launch's list, and
// never reset.
TEST_F(CudaHalf, AmpUnscaleMatchesTheCpu) {
  std::vector<Tensor> cpu, gpu;
  const DType dtypes[] = {kFloat64, kBFloat16, kFloat16};
  for (int k = 0; k < 60; ++k) {
    const int64_t n = k == 7 ? 0 : k == 11 ? 321 * 65536 + 5 : 17 * k + 1;
    const DType d = k < 52 ? kFloat32 : dtypes[k % 3];
    const Tensor t = testing::half_sample(kFloat32, {n}, 40 + k).mul(1000).to(d);
    cpu.push_back(t);
    gpu.push_back(t.to(kGpu));
  }
  const Tensor inv = full({1}, 1.0 / 3.0, TensorOptions(kFloat32));
  Tensor found_cpu = zeros({1}), found_gpu = zeros({1}, TensorOptions().device(kGpu));
  native::amp_unscale_(cpu, found_cpu, inv);
  native::amp_unscale_(gpu, found_gpu, inv.to(kGpu));
  for (int k = 0; k < 60; ++k)
    EXPECT_TRUE(testing::SameValues(gpu[k].cpu(), cpu[k])) << "gradient " << k;
  EXPECT_EQ(found_gpu.item<float>(), 0.0f);
  // An inf in a later launch's list (float32 gradient 50, after the split
  // gradient 11 and 48 others).
  Tensor bad = gpu[50].narrow(0, 0, 1);
  bad.fill_(std::numeric_limits<double>::infinity());
  native::amp_unscale_(gpu, found_gpu, inv.to(kGpu));
  EXPECT_EQ(found_gpu.item<float>(), 1.0f);
  native::amp_unscale_({gpu[0]}, found_gpu, inv.to(kGpu));
  EXPECT_EQ(found_gpu.item<float>(), 1.0f);
}

TEST_F(CudaHalf, ReductionsAccumulateInFloat32) {
  for (DType d : kHalfDTypes) {
    // 2^15 ones: a 16-bit accumulator would stop at 256 (bfloat16) or 2048.
    const Tensor ones16 = ones({128, 256}).to(d);
    EXPECT_EQ(ones16.to(kGpu).sum().item<double>(), 32768.0) << dtype_name(d);
    const Tensor x = sample(d, {64, 300}, 3, -1, 1);
    EXPECT_TRUE(WithinOneUlp(x.to(kGpu).sum({1}, false), x.sum({1}, false), d)) << dtype_name(d);
    EXPECT_TRUE(WithinOneUlp(x.to(kGpu).mean({0}, false), x.mean({0}, false), d)) << dtype_name(d);
  }
}

// GradScaler with its weights and gradients on the GPU: the CPU's scales,
// growth trackers and skipped steps exactly, with inf and NaN injected
// (tests/GradScalerScript.h, the script grad_scaler_test holds to PyTorch).
TEST_F(CudaHalf, NnOpsAreTheRoundedFloat32ResultOnTheGpu) {
  testing::expect_nn_ops_round_float32(kGpu);
}

// Batch norm reads and writes 16-bit activations as they are on the GPU
// (float32 statistics and arithmetic): training and evaluation forward and
// the backward give the GPU's float32 results rounded once (one ulp allowed
// where the compiler fuses differently), the same float32 statistics and
// running statistics, and no float32 copy of the activations (the peak grows
// by the 16-bit output and the statistics, not by 4-byte copies).
TEST_F(CudaHalf, BatchNormRunsSixteenBitActivationsAsTheyAre) {
  using testing::half_sample;
  using testing::widened;
  using testing::WithinOneUlpOfRounded;
  for (DType d : kHalfDTypes) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor x = half_sample(d, {6, 5, 7, 9}, 21, kGpu);
    const Tensor go = half_sample(d, x.sizes(), 22, kGpu);
    const Tensor w = half_sample(kFloat32, {5}, 23, kGpu);
    const Tensor b = half_sample(kFloat32, {5}, 24, kGpu);
    const TensorOptions on_gpu = TensorOptions().device(kGpu);
    for (bool training : {true, false}) {
      SCOPED_TRACE(training ? "training" : "evaluation");
      Tensor rm = zeros({5}, on_gpu), rv = ones({5}, on_gpu);
      Tensor rm32 = rm.clone(), rv32 = rv.clone();
      auto [y, mean, invstd] = native::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
      auto [y32, mean32, invstd32] =
          native::batch_norm(widened(x), rm32, rv32, w, b, training, 0.1, 1e-5);
      EXPECT_EQ(y.dtype(), d);
      EXPECT_TRUE(WithinOneUlpOfRounded(y, y32));
      EXPECT_TRUE(allclose(mean, mean32, 1e-6, 1e-7));
      EXPECT_TRUE(allclose(invstd, invstd32, 1e-6, 1e-7));
      EXPECT_TRUE(allclose(rm, rm32, 1e-6, 1e-7));
      EXPECT_TRUE(allclose(rv, rv32, 1e-6, 1e-7));
      Tensor gi, gw, gb, gi32, gw32, gb32;
      native::batch_norm_backward(go, x, w, mean, invstd, training, true, true, true, gi, gw, gb);
      native::batch_norm_backward(widened(go), widened(x), w, mean32, invstd32, training, true,
                                  true, true, gi32, gw32, gb32);
      EXPECT_EQ(gi.dtype(), d);
      EXPECT_TRUE(WithinOneUlpOfRounded(gi, gi32));
      EXPECT_TRUE(allclose(gw, gw32, 1e-5, 1e-6));
      EXPECT_TRUE(allclose(gb, gb32, 1e-5, 1e-6));
    }
    // 4 M activations: a float32 copy of the input alone would add 16 MB.
    const Tensor big = half_sample(d, {16, 64, 64, 64}, 25, kGpu);
    cuda::synchronize();
    cuda::reset_peak_memory_stats(kGpu.index);
    const int64_t before = cuda::memory_allocated(kGpu.index);
    {
      auto [y, mean, invstd] =
          native::batch_norm(big, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
      Tensor gi, gw, gb;
      native::batch_norm_backward(y, big, Tensor(), mean, invstd, true, true, true, true, gi, gw,
                                  gb);
      cuda::synchronize();
    }
    const int64_t grown = cuda::max_memory_allocated(kGpu.index) - before;
    EXPECT_LE(grown, 2 * big.numel() * 2 + (int64_t(2) << 20))
        << "peak grew by " << grown << " bytes for " << big.numel() << " 16-bit activations";
  }
}

TEST_F(CudaHalf, GradScalerOnTheGpuFollowsTheCpu) {
  const auto cpu = testing::run_scaler_script(Device(kCPU));
  const auto gpu = testing::run_scaler_script(kGpu);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t step = 0; step < cpu.size(); ++step) {
    EXPECT_EQ(gpu[step].scale, cpu[step].scale) << "step " << step;
    EXPECT_EQ(gpu[step].tracker, cpu[step].tracker) << "step " << step;
    EXPECT_EQ(gpu[step].ran, cpu[step].ran) << "step " << step;
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(gpu[step].w[i], cpu[step].w[i], 1e-6) << "step " << step;
  }
}

}  // namespace
}  // namespace loom
