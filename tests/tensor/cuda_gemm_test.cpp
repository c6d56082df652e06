// cuBLAS GEMM (tensor/cuda/Gemm.cu via tensor/cuda/Gemm.cpp) against
// the CPU kernels as the oracle: mm, bmm, matmul (every rank combination,
// broadcast batch dims) and linear, forward and backward through autograd,
// float32 (TF32 off), float64, float16 and bfloat16, plus the integer kernel; transposed,
// padded, sliced (copied) and expanded (batch stride 0) operands; odd sizes,
// size-1 and empty dims; errors.  Tagged gpu; every case skips itself where
// no GPU is visible.  The layout logic itself is host-tested in
// gemm_layout_test.cpp.
#include <vector>

#include "tensor/CudaFlags.h"
#include "tensor/native/Linalg.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::CloseScaled;
using testing_cuda::GradParity;
using testing_cuda::kGpu;
using testing_cuda::sample;

// TF32 off (the default) for every case; restored afterwards.
class CudaGemm : public testing_cuda::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    saved_ = cuda::matmul_allow_tf32();
    cuda::set_matmul_allow_tf32(false);
  }
  void TearDown() override { cuda::set_matmul_allow_tf32(saved_); }
  bool saved_ = false;
};

const DType kFloats[] = {kFloat32, kFloat64};

TEST_F(CudaGemm, MmShapesAndDTypes) {
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 4}, {17, 9, 13}, {1, 7, 1}, {1, 1, 1}, {64, 33, 65}, {5, 1, 6}, {0, 5, 3}, {3, 0, 4}};
  for (DType d : {kFloat32, kFloat64, kInt32, kInt64})
    for (const auto& s : shapes) {
      const Tensor a = sample(d, {s[0], s[1]}, 1), b = sample(d, {s[1], s[2]}, 2);
      EXPECT_TRUE(CloseScaled(native::mm(a.to(kGpu), b.to(kGpu)), native::mm(a, b)))
          << dtype_name(d) << " " << s[0] << "x" << s[1] << "x" << s[2];
    }
}

TEST_F(CudaGemm, MmStridedOperandsForwardAndBackward) {
  // Each view goes to cuBLAS as op N / op T (transposes, padded rows) or as a
  // copy (every other column); the backward multiplies by transposes again.
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<IntList, Fn>> views = {
      {{6, 7}, [](const Tensor& t) { return t; }},
      {{7, 6}, [](const Tensor& t) { return t.t(); }},
      {{6, 10}, [](const Tensor& t) { return t.narrow(1, 2, 7); }},
      {{9, 6}, [](const Tensor& t) { return t.narrow(0, 1, 7).t(); }},
      {{6, 14}, [](const Tensor& t) { return t.slice(1, 0, 14, 2); }},
  };
  const std::vector<std::pair<IntList, Fn>> rhs = {
      {{7, 5}, [](const Tensor& t) { return t; }},
      {{5, 7}, [](const Tensor& t) { return t.t(); }},
      {{7, 8}, [](const Tensor& t) { return t.narrow(1, 3, 5); }},
      {{14, 5}, [](const Tensor& t) { return t.slice(0, 0, 14, 2); }},
  };
  for (DType d : kFloats)
    for (size_t i = 0; i < views.size(); ++i)
      for (size_t j = 0; j < rhs.size(); ++j) {
        const auto& va = views[i];
        const auto& vb = rhs[j];
        EXPECT_TRUE(GradParity([&](const std::vector<Tensor>& in) {
          return va.second(in[0]).mm(vb.second(in[1]));
        }, {sample(d, va.first, 3), sample(d, vb.first, 4)}))
            << dtype_name(d) << " views " << i << ", " << j;
      }
}

TEST_F(CudaGemm, BmmTransposedAndExpandedBatches) {
  for (DType d : kFloats) {
    // Plain, transposed matrices, a permuted batch dim, and a batch broadcast by
    // expand (batch stride 0 goes to cuBLAS as is).
    EXPECT_TRUE(GradParity([](const std::vector<Tensor>& in) { return in[0].bmm(in[1]); },
                           {sample(d, {4, 3, 5}, 1), sample(d, {4, 5, 6}, 2)}));
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) {
          return in[0].transpose(1, 2).bmm(in[1].transpose(1, 2));
        },
        {sample(d, {4, 5, 3}, 3), sample(d, {4, 6, 5}, 4)}));
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return in[0].permute({1, 0, 2}).bmm(in[1]); },
        {sample(d, {3, 4, 5}, 5), sample(d, {4, 5, 2}, 6)}));
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return in[0].expand({6, 3, 5}).bmm(in[1]); },
        {sample(d, {1, 3, 5}, 7), sample(d, {6, 5, 4}, 8)}));
    // Forward only: native::bmm with an expanded operand keeps stride 0.
    const Tensor a = sample(d, {1, 3, 5}, 9), b = sample(d, {6, 5, 4}, 10);
    EXPECT_TRUE(CloseScaled(native::bmm(a.to(kGpu).expand({6, 3, 5}), b.to(kGpu)),
                            native::bmm(a.expand({6, 3, 5}), b)));
  }
  // Empty batch and empty matrices.
  const Tensor e1 = sample(kFloat32, {0, 3, 4}, 1), e2 = sample(kFloat32, {0, 4, 2}, 2);
  EXPECT_TRUE(CloseScaled(native::bmm(e1.to(kGpu), e2.to(kGpu)), native::bmm(e1, e2)));
  const Tensor z1 = sample(kFloat64, {2, 3, 0}, 1), z2 = sample(kFloat64, {2, 0, 4}, 2);
  EXPECT_TRUE(CloseScaled(native::bmm(z1.to(kGpu), z2.to(kGpu)), native::bmm(z1, z2)));
  // Integers through the plain kernel, transposed too.
  const Tensor i1 = sample(kInt64, {3, 4, 5}, 1), i2 = sample(kInt64, {3, 6, 4}, 2);
  EXPECT_TRUE(CloseScaled(native::bmm(i1.to(kGpu).transpose(1, 2), i2.to(kGpu).transpose(1, 2)),
                          native::bmm(i1.transpose(1, 2), i2.transpose(1, 2))));
}

TEST_F(CudaGemm, MatmulEveryRankAndBroadcast) {
  const std::vector<std::pair<IntList, IntList>> cases = {
      {{5}, {5}},       {{3, 5}, {5}},          {{5}, {5, 4}},       {{3, 5}, {5, 4}},
      {{2, 3, 5}, {5}}, {{2, 3, 5}, {5, 4}},    {{5}, {2, 5, 4}},    {{2, 1, 3, 5}, {4, 5, 6}},
      {{7, 3, 5}, {1, 5, 2}}, {{2, 3, 0}, {0, 4}},
  };
  for (DType d : kFloats)
    for (const auto& [sa, sb] : cases)
      EXPECT_TRUE(GradParity([](const std::vector<Tensor>& in) { return in[0].matmul(in[1]); },
                             {sample(d, sa, 1), sample(d, sb, 2)}))
          << dtype_name(d) << " " << shape_str(sa) << " @ " << shape_str(sb);
}

TEST_F(CudaGemm, LinearWithAndWithoutBias) {
  for (DType d : kFloats) {
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
        {sample(d, {6, 7}, 1), sample(d, {5, 7}, 2), sample(d, {5}, 3)}));
    EXPECT_TRUE(GradParity([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); },
                           {sample(d, {2, 3, 7}, 4), sample(d, {5, 7}, 5)}));
    // A transposed input and an odd, wide layer.
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return linear(in[0].t(), in[1], in[2]); },
        {sample(d, {33, 9}, 6), sample(d, {31, 33}, 7), sample(d, {31}, 8)}));
    // Empty batch.
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
        {sample(d, {0, 7}, 9), sample(d, {5, 7}, 10), sample(d, {5}, 11)}));
  }
}

// float16 and bfloat16 go to cuBLAS as they are (tensor cores, float32
// accumulation, one rounding); the CPU computes them in float32 and rounds
// once, so the two differ by the accumulation order: within a unit in the
// last place of the 16-bit result, relative to the largest value.
TEST_F(CudaGemm, HalfAndBfloat16ProductsAccumulateInFloat32) {
  for (DType d : {kFloat16, kBFloat16}) {
    const double rtol = d == kFloat16 ? 2e-3 : 1e-2;
    for (const auto& s : std::vector<std::vector<int64_t>>{{64, 33, 65}, {17, 9, 13}, {128, 256, 64}}) {
      const Tensor a = sample(d, {s[0], s[1]}, 1), b = sample(d, {s[1], s[2]}, 2);
      const Tensor got = native::mm(a.to(kGpu), b.to(kGpu));
      EXPECT_EQ(got.dtype(), d);
      EXPECT_TRUE(CloseScaled(got, native::mm(a, b), rtol)) << dtype_name(d);
    }
    EXPECT_TRUE(CloseScaled(native::bmm(sample(d, {3, 9, 17}, 3).to(kGpu), sample(d, {3, 17, 5}, 4).to(kGpu)),
                            native::bmm(sample(d, {3, 9, 17}, 3), sample(d, {3, 17, 5}, 4)), rtol))
        << dtype_name(d);
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
        {sample(d, {6, 40}, 5), sample(d, {24, 40}, 6), sample(d, {24}, 7)}, rtol))
        << dtype_name(d);
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return linear(in[0].t(), in[1]); },
        {sample(d, {33, 9}, 8), sample(d, {31, 33}, 9)}, rtol))
        << dtype_name(d);
  }
}

TEST_F(CudaGemm, Tf32SwitchIsHonoured) {
  // With TF32 allowed the product is close (10-bit mantissa inputs) but may
  // differ; with it off it must meet float32 accuracy.
  const Tensor a = sample(kFloat32, {128, 256}, 1), b = sample(kFloat32, {256, 64}, 2);
  const Tensor expected = native::mm(a, b);
  cuda::set_matmul_allow_tf32(true);
  EXPECT_TRUE(CloseScaled(native::mm(a.to(kGpu), b.to(kGpu)), expected, 1e-2));
  cuda::set_matmul_allow_tf32(false);
  EXPECT_TRUE(CloseScaled(native::mm(a.to(kGpu), b.to(kGpu)), expected, 1e-5));
}

// A long inner size (where cuBLAS picks split-K kernels): with 16-bit
// partial-sum reductions forbidden the product meets the float64 product's
// one rounding within an ulp or two; allowed (PyTorch's default), within a
// few.  Both settings run and each switch restores its own state.
TEST_F(CudaGemm, ReducedPrecisionReductionSwitchesAreHonoured) {
  const bool fp16 = cuda::matmul_allow_fp16_reduced_precision_reduction();
  const bool bf16 = cuda::matmul_allow_bf16_reduced_precision_reduction();
  for (DType d : {kFloat16, kBFloat16}) {
    const Tensor a = sample(d, {8, 32768}, 1), b = sample(d, {32768, 8}, 2);
    const Tensor exact = native::mm(a.to(kFloat64), b.to(kFloat64));
    const double ulp = d == kFloat16 ? 1.0 / 1024 : 1.0 / 128;
    for (bool allow : {false, true}) {
      cuda::set_matmul_allow_fp16_reduced_precision_reduction(allow);
      cuda::set_matmul_allow_bf16_reduced_precision_reduction(allow);
      const Tensor got = native::mm(a.to(kGpu), b.to(kGpu));
      EXPECT_EQ(got.dtype(), d);
      EXPECT_TRUE(CloseScaled(got.to(kFloat64), exact, (allow ? 8 : 2) * ulp))
          << dtype_name(d) << (allow ? " allowed" : " forbidden");
    }
  }
  cuda::set_matmul_allow_fp16_reduced_precision_reduction(fp16);
  cuda::set_matmul_allow_bf16_reduced_precision_reduction(bf16);
}

TEST_F(CudaGemm, ErrorsNameShapesDevicesAndDTypes) {
  const Tensor a = sample(kFloat32, {3, 4}, 1).to(kGpu);
  EXPECT_LOOM_ERROR(native::mm(a, sample(kFloat32, {5, 2}, 2).to(kGpu)), "mm", "3x4", "5x2");
  EXPECT_LOOM_ERROR(native::mm(a, sample(kFloat32, {4, 2}, 2)), "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::mm(a, sample(kFloat64, {4, 2}, 2).to(kGpu)), "dtype");
  const Tensor u = sample(kUInt8, {3, 3}, 3).to(kGpu);
  EXPECT_LOOM_ERROR(native::mm(u, u), "uint8");
}

}  // namespace
}  // namespace loom
