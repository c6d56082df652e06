// mm / bmm / matmul / linear forward values and errors.  Expected values
// were computed with PyTorch 1.13 (torch.mm, torch.matmul, F.linear) on the
// same pattern inputs; the GEMM kernels are also compared with a naive
// triple loop over many shapes and layouts.
#include <random>

#include "tensor/cpu/Gemm.h"
#include "tensor/native/Linalg.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

// Deterministic inputs shared with the PyTorch script: ((i * mul) % mod) / mod - 0.5.
Tensor pat(int64_t n, int64_t mul, int64_t mod, IntList shape, DType dtype = kFloat64) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * mul) % mod) / mod - 0.5;
  return tensor<double>(v, shape).to(dtype);
}

// A naive reference product in double.
Tensor naive_mm(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  std::vector<double> out(n * m, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < m; ++j) out[i * m + j] += av[i * k + p] * bv[p * m + j];
  return tensor<double>(out, {n, m});
}

TEST(Linalg, MmMatchesPyTorch) {
  const Tensor out = mm(pat(6, 5, 7, {2, 3}), pat(6, 3, 11, {3, 2}));
  EXPECT_TRUE(AllClose(out, tensor<double>({0.288961, 0.1915584, 0.1655844, 0.1850649}, {2, 2}),
                       1e-5, 1e-6));
  // float32 too, through the method.
  const Tensor f = pat(6, 5, 7, {2, 3}, kFloat32).mm(pat(6, 3, 11, {3, 2}, kFloat32));
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(f, out, 1e-5, 1e-6));
}

// Every kernel, many shapes (edge tiles, blocking boundaries) and every
// combination of transposed operands, against the naive product.
TEST(Linalg, MmMatchesNaiveForManyShapesAndLayouts) {
  std::mt19937 rng(7);
  const std::vector<cpu::GemmKernel> kernels = {cpu::GemmKernel::kAuto, cpu::GemmKernel::kEigen};
  for (cpu::GemmKernel kernel : kernels) {
    cpu::set_gemm_kernel(kernel);
    for (int trial = 0; trial < 24; ++trial) {
      const int64_t n = 1 + rng() % 70, k = 1 + rng() % 300, m = 1 + rng() % 90;
      Generator gen(trial + 1);
      Tensor a = (rng() & 1) ? randn({k, n}, kFloat32, &gen).t() : randn({n, k}, kFloat32, &gen);
      Tensor b = (rng() & 1) ? randn({m, k}, kFloat32, &gen).t() : randn({k, m}, kFloat32, &gen);
      const Tensor out = mm(a, b);
      EXPECT_TRUE(AllClose(out, naive_mm(a, b), 1e-4, 1e-4))
          << "kernel " << static_cast<int>(kernel) << " n=" << n << " k=" << k << " m=" << m;
    }
  }
  cpu::set_gemm_kernel(cpu::GemmKernel::kAuto);
  // One large product crossing every blocking boundary (KC, MC, NC).
  Generator gen(99);
  const Tensor a = randn({300, 520}, kFloat32, &gen), b = randn({520, 1100}, kFloat32, &gen);
  EXPECT_TRUE(AllClose(mm(a, b), naive_mm(a, b), 1e-4, 1e-3));
}

// Products of at most 8 rows (a linear layer on a few samples) run unpacked
// kernels on AVX-512 machines: every row count 1..8, both layouts of each
// operand, k and n off the 16-lane vector width, beta 0 and 1 (addmm), and
// views with leading dimensions larger than their widths.
TEST(Linalg, FewRowProductsMatchNaive) {
  std::mt19937 rng(11);
  for (int64_t m = 1; m <= 9; ++m) {
    for (int layout = 0; layout < 4; ++layout) {
      const int64_t k = 90 + rng() % 300, n = 60 + rng() % 200;
      Generator gen(m * 10 + layout);
      const Tensor a =
          (layout & 1) ? randn({k, m}, kFloat32, &gen).t() : randn({m, k}, kFloat32, &gen);
      const Tensor b =
          (layout & 2) ? randn({n, k}, kFloat32, &gen).t() : randn({k, n}, kFloat32, &gen);
      ASSERT_EQ(mm(a, b).sizes(), (IntList{m, n}));
      EXPECT_TRUE(AllClose(mm(a, b), naive_mm(a, b), 1e-4, 1e-4))
          << "m=" << m << " k=" << k << " n=" << n << " layout " << layout;
      // C = 0.5 * op(A) op(B) + beta * C straight through the kernel.
      for (float beta : {1.0f, 0.25f}) {
        const Tensor c0 = randn({m, n}, kFloat32, &gen);
        Tensor c = c0.clone();
        const Tensor ac = a.contiguous(), bc = b.contiguous();
        const bool ta = layout & 1, tb = layout & 2;
        const Tensor a_mem = ta ? ac.t().contiguous() : ac, b_mem = tb ? bc.t().contiguous() : bc;
        cpu::gemm<float>(ta, tb, m, n, k, 0.5f, a_mem.data_ptr<float>(), ta ? m : k,
                         b_mem.data_ptr<float>(), tb ? k : n, beta, c.data_ptr<float>(), n);
        const Tensor expected = naive_mm(a, b) * 0.5 + c0.to(kFloat64) * beta;
        EXPECT_TRUE(AllClose(c, expected, 1e-4, 1e-4))
            << "alpha 0.5, beta " << beta << ", m=" << m << " k=" << k << " n=" << n;
      }
    }
  }
  // Operands that are column slices of wider matrices (lda, ldb > width).
  Generator gen(5);
  const Tensor a = randn({4, 700}, kFloat32, &gen).slice(1, 3, 603);
  const Tensor b = randn({600, 350}, kFloat32, &gen).slice(1, 7, 307);
  EXPECT_TRUE(AllClose(mm(a, b), naive_mm(a.contiguous(), b.contiguous()), 1e-4, 1e-4));
  EXPECT_TRUE(AllClose(mm(a, b.t().contiguous().t()), naive_mm(a.contiguous(), b.contiguous()),
                       1e-4, 1e-4));
}

TEST(Linalg, MmHandlesStridedAndSlicedInputs) {
  Generator gen(3);
  const Tensor big = randn({8, 10}, kFloat64, &gen);
  const Tensor a = big.slice(1, 0, 10, 2);         // (8, 5), column stride 2: copied
  const Tensor b = big.narrow(0, 1, 5).narrow(1, 2, 6);  // (5, 6), row stride 10
  EXPECT_TRUE(AllClose(mm(a, b), naive_mm(a, b), 1e-10, 1e-10));
  EXPECT_TRUE(AllClose(mm(b.t(), a.t()), naive_mm(b.t().contiguous(), a.t().contiguous()),
                       1e-10, 1e-10));
}

TEST(Linalg, MmIntegerAndEmpty) {
  const Tensor a = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = tensor<int64_t>({1, 0, 0, 1, 2, -1}, {3, 2});
  const Tensor out = mm(a, b);
  EXPECT_EQ(out.dtype(), kInt64);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{7, -1, 16, -1}));
  const Tensor z = mm(zeros({2, 0}), zeros({0, 3}));
  EXPECT_EQ(z.sizes(), (IntList{2, 3}));
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.f));
}

TEST(Linalg, BmmAndBroadcastMatmulMatchPyTorch) {
  const Tensor A = pat(12, 5, 13, {2, 1, 2, 3}), B = pat(18, 7, 17, {3, 3, 2});
  const Tensor out = matmul(A, B);
  EXPECT_EQ(out.sizes(), (IntList{2, 3, 2, 2}));
  EXPECT_TRUE(AllClose(
      out,
      tensor<double>({0.2522624, -0.0441176, 0.2477376, -0.1662896, -0.0644796, -0.2070136,
                      -0.1595023, -0.111991, -0.2273756, -0.0237557, -0.1052036, -0.1730769,
                      0.0961538, 0.1527149, 0.091629, 0.030543, 0.1278281, -0.0463801,
                      0.0328054, 0.0486425, -0.071267, 0.1776018, 0.050905, 0.0282805},
                     {2, 3, 2, 2}),
      1e-5, 1e-6));
  // bmm of one broadcast slice equals the matching matmul block.
  const Tensor b3 = bmm(A.select(0, 1).expand({3, 2, 3}).contiguous(), B);
  EXPECT_TRUE(AllClose(b3, out.select(0, 1), 1e-12, 1e-12));
}

TEST(Linalg, MatmulVectorCases) {
  const Tensor B = pat(18, 7, 17, {3, 3, 2});
  EXPECT_TRUE(AllClose(matmul(B, pat(2, 2, 5, {2})),
                       tensor<double>({0.2588235, -0.1352941, -0.0294118, -0.0235294, 0.0823529,
                                       0.1882353, -0.2058824, -0.1, 0.0058824},
                                      {3, 3}),
                       1e-5, 1e-6));
  EXPECT_TRUE(AllClose(matmul(pat(3, 3, 7, {3}), B),
                       tensor<double>({0.2794118, -0.0945378, -0.1071429, -0.1953782, -0.2079832,
                                       -0.0819328},
                                      {3, 2}),
                       1e-5, 1e-6));
  // 1-D . 1-D is a 0-dim dot product; 2-D @ 1-D a matrix-vector product.
  const Tensor dot = matmul(tensor<double>({1, 2, 3}), tensor<double>({4, 5, 6}));
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_DOUBLE_EQ(dot.item<double>(), 32.0);
  const Tensor mv = tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3}).matmul(tensor<double>({1, 0, -1}));
  EXPECT_EQ(mv.to_vector<double>(), (std::vector<double>{-2, -2}));
  const Tensor vm = matmul(tensor<double>({1, -1}), tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(vm.to_vector<double>(), (std::vector<double>{-3, -3, -3}));
}

TEST(Linalg, LinearMatchesPyTorch) {
  const Tensor out = linear(pat(18, 7, 19, {2, 3, 3}), pat(12, 5, 13, {4, 3}),
                            tensor<double>({1, 2, 3, 4}));
  EXPECT_EQ(out.sizes(), (IntList{2, 3, 4}));
  EXPECT_TRUE(AllClose(
      out,
      tensor<double>({1.3289474, 2.2682186, 2.9706478, 3.909919, 1.2925101, 2.2803644, 2.9261134,
                      3.9139676, 1.2560729, 2.2925101, 2.8815789, 3.9180162, 0.9504049,
                      1.8815789, 3.2601215, 4.1912955, 0.9139676, 1.8937247, 3.215587, 4.1953441,
                      0.8775304, 1.9058704, 3.1710526, 4.1993927},
                     {2, 3, 4}),
      1e-5, 1e-6));
  // Without bias: input @ weight^T.
  const Tensor x = pat(6, 5, 7, {2, 3}), w = pat(12, 5, 13, {4, 3});
  EXPECT_TRUE(AllClose(linear(x, w), naive_mm(x, w.t().contiguous()), 1e-12, 1e-12));
}

// linear_backward converts a grad_output of another dtype (the GEMM kernels
// read every operand in the output's dtype) and refuses one that is not
// shaped like linear's output.
TEST(Linalg, LinearBackwardConvertsTheGradientsDtypeAndChecksItsShape) {
  Generator gen(3);
  const Tensor x = randn({4, 3}, kFloat32, &gen), w = randn({5, 3}, kFloat32, &gen);
  const Tensor g = randn({4, 5}, kFloat32, &gen);
  Tensor gi, gw, gb, gi64, gw64, gb64;
  native::linear_backward(g, x, w, true, true, true, gi, gw, gb);
  native::linear_backward(g.to(kFloat64), x, w, true, true, true, gi64, gw64, gb64);
  EXPECT_EQ(gi64.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(gi64, gi, 0, 0));
  EXPECT_TRUE(AllClose(gw64, gw, 0, 0));
  EXPECT_TRUE(AllClose(gb64, gb, 0, 0));
  EXPECT_LOOM_ERROR(native::linear_backward(zeros({4, 6}), x, w, true, true, true, gi, gw, gb),
                    "linear_backward", "grad_output", "[4, 5]", "[4, 6]");
  EXPECT_LOOM_ERROR(native::linear_backward(g, x, zeros({5, 2}), true, true, true, gi, gw, gb),
                    "linear_backward", "[4, 3]", "[5, 2]");
}

TEST(Linalg, Errors) {
  EXPECT_LOOM_ERROR(mm(zeros({2, 3}), zeros({4, 5})),
                    "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  EXPECT_LOOM_ERROR(mm(zeros({2, 3, 1}), zeros({3, 5})), "mm", "2-D", "[2, 3, 1]");
  EXPECT_LOOM_ERROR(mm(zeros({2, 3}), zeros({3, 5}, kFloat64)), "mm", "same dtype", "float32",
                    "float64");
  EXPECT_LOOM_ERROR(mm(zeros({2, 3}), zeros({3, 5}).to(Device(kCPU, 1))), "mm", "cpu:1");
  EXPECT_LOOM_ERROR(mm(zeros({2, 3}, kBool), zeros({3, 5}, kBool)), "mm", "bool");
  EXPECT_LOOM_ERROR(bmm(zeros({2, 2, 3}), zeros({3, 3, 2})), "bmm", "batch", "[2, 2, 3]",
                    "[3, 3, 2]");
  EXPECT_LOOM_ERROR(bmm(zeros({2, 2, 3}), zeros({2, 4, 2})), "bmm", "2x2x3 and 2x4x2");
  EXPECT_LOOM_ERROR(matmul(zeros({2, 2, 3}), zeros({4, 2})), "matmul", "2x2x3 and 4x2");
  EXPECT_LOOM_ERROR(matmul(zeros({2, 2, 3}), zeros({4, 3, 2})), "matmul", "broadcast");
  EXPECT_LOOM_ERROR(linear(zeros({5, 3}), zeros({4, 2})), "linear", "[5, 3]", "[4, 2]");
  EXPECT_LOOM_ERROR(linear(zeros({5, 3}), zeros({4, 3}), zeros({5})), "linear", "bias", "[4]");
}

}  // namespace
}  // namespace loom
