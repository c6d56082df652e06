// native::layer_norm and layer_norm_backward on the CPU: values against a
// plain double-precision reference written out below (the formulas of
// torch.nn.functional.layer_norm), the statistics' shapes (ATen's
// native_layer_norm), strided inputs, empty inputs, a large mean in float32,
// the dispatch slots, and every argument error.
#include <cmath>

#include "tensor/native/LayerNorm.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

struct Reference {
  Tensor out, mean, rstd, grad_input, grad_weight, grad_bias;
};

// Straight from the definition, in double: rows of N values.
Reference reference(const Tensor& input, int64_t N, const Tensor& weight, const Tensor& bias,
                    double eps, const Tensor& grad_out) {
  const std::vector<double> x = input.to_vector<double>(), dy = grad_out.to_vector<double>();
  const std::vector<double> w =
      weight.defined() ? weight.to_vector<double>() : std::vector<double>(N, 1.0);
  const std::vector<double> b =
      bias.defined() ? bias.to_vector<double>() : std::vector<double>(N, 0.0);
  const int64_t M = N ? static_cast<int64_t>(x.size()) / N : 0;
  std::vector<double> y(x.size()), dx(x.size()), mean(M), rstd(M), dw(N, 0.0), db(N, 0.0);
  for (int64_t i = 0; i < M; ++i) {
    double s = 0, sq = 0;
    for (int64_t j = 0; j < N; ++j) s += x[i * N + j];
    mean[i] = s / N;
    for (int64_t j = 0; j < N; ++j) sq += (x[i * N + j] - mean[i]) * (x[i * N + j] - mean[i]);
    rstd[i] = 1 / std::sqrt(sq / N + eps);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < N; ++j) {
      const double xh = (x[i * N + j] - mean[i]) * rstd[i], g = dy[i * N + j] * w[j];
      y[i * N + j] = xh * w[j] + b[j];
      mg += g / N;
      mgx += g * xh / N;
      dw[j] += dy[i * N + j] * xh;
      db[j] += dy[i * N + j];
    }
    for (int64_t j = 0; j < N; ++j) {
      const double xh = (x[i * N + j] - mean[i]) * rstd[i], g = dy[i * N + j] * w[j];
      dx[i * N + j] = rstd[i] * (g - mg - xh * mgx);
    }
  }
  return {tensor<double>(y, input.sizes()),  tensor<double>(mean, {M}), tensor<double>(rstd, {M}),
          tensor<double>(dx, input.sizes()), tensor<double>(dw, {N}),   tensor<double>(db, {N})};
}

Tensor sample(IntList sizes, uint64_t seed, DType dtype = kFloat64, double lo = -2, double hi = 3) {
  Generator gen(seed);
  return (rand(sizes, kFloat64, &gen) * (hi - lo) + lo).to(dtype);
}

TEST(LayerNorm, MatchesReferenceForwardAndBackward) {
  struct Case {
    IntList shape, normalized;
  };
  const std::vector<Case> cases = {{{4, 5}, {5}},       {{2, 3, 7}, {7}}, {{2, 3, 4}, {3, 4}},
                                   {{6}, {6}},          {{3, 1}, {1}},    {{2, 2, 3, 5}, {2, 3, 5}},
                                   {{5, 1100}, {1100}}, {{130, 3}, {3}}};
  for (DType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
    for (const Case& c : cases)
      for (int affine = 0; affine < 4; ++affine) {
        const Tensor x = sample(c.shape, 1, dtype);
        const Tensor w = affine & 1 ? sample(c.normalized, 2, dtype) : Tensor();
        const Tensor b = affine & 2 ? sample(c.normalized, 3, dtype) : Tensor();
        const Tensor dy = sample(c.shape, 4, dtype);
        const int64_t N = numel_of(c.normalized);
        const Reference ref = reference(x, N, w, b, 1e-5, dy);
        auto [out, mean, rstd] = native::layer_norm(x, c.normalized, w, b, 1e-5);
        const std::string what = shape_str(c.shape) + " over " + shape_str(c.normalized) +
                                 " affine " + std::to_string(affine) + " " + dtype_name(dtype);
        EXPECT_EQ(out.dtype(), dtype) << what;
        EXPECT_TRUE(AllClose(out, ref.out, tol, tol)) << what;
        EXPECT_TRUE(AllClose(mean.reshape({-1}), ref.mean, tol, tol)) << what;
        EXPECT_TRUE(AllClose(rstd.reshape({-1}), ref.rstd, tol, tol)) << what;
        auto [gi, gw, gb] =
            native::layer_norm_backward(dy, x, c.normalized, mean, rstd, w, {true, true, true});
        // dx cancels to 0 for rows of one value (N = 1): rounding noise scales with rstd.
        const double gtol = tol * std::max(1.0, ref.rstd.max().item<double>());
        EXPECT_TRUE(AllClose(gi, ref.grad_input, tol, gtol)) << what;
        EXPECT_TRUE(AllClose(gw.reshape({-1}), ref.grad_weight, tol * 10, tol)) << what;
        EXPECT_TRUE(AllClose(gb.reshape({-1}), ref.grad_bias, tol * 10, tol)) << what;
        EXPECT_EQ(gw.sizes(), c.normalized) << what;
        EXPECT_EQ(gb.sizes(), c.normalized) << what;
      }
  }
}

TEST(LayerNorm, StatisticsHaveATenShapes) {
  auto [out, mean, rstd] =
      native::layer_norm(sample({2, 3, 4, 5}, 1), {4, 5}, Tensor(), Tensor(), 1e-5);
  EXPECT_EQ(out.sizes(), (IntList{2, 3, 4, 5}));
  EXPECT_EQ(mean.sizes(), (IntList{2, 3, 1, 1}));
  EXPECT_EQ(rstd.sizes(), (IntList{2, 3, 1, 1}));
  auto [out1, mean1, rstd1] = native::layer_norm(sample({7}, 1), {7}, Tensor(), Tensor(), 1e-5);
  EXPECT_EQ(mean1.sizes(), (IntList{1}));
}

TEST(LayerNorm, OutputMaskSkipsGradients) {
  const Tensor x = sample({3, 4}, 1), w = sample({4}, 2), dy = sample({3, 4}, 3);
  auto [out, mean, rstd] = native::layer_norm(x, {4}, w, Tensor(), 1e-5);
  auto [gi, gw, gb] = native::layer_norm_backward(dy, x, {4}, mean, rstd, w, {false, true, false});
  EXPECT_FALSE(gi.defined());
  EXPECT_TRUE(gw.defined());
  EXPECT_FALSE(gb.defined());
  auto [gi2, gw2, gb2] =
      native::layer_norm_backward(dy, x, {4}, mean, rstd, w, {false, false, false});
  EXPECT_FALSE(gi2.defined() || gw2.defined() || gb2.defined());
}

TEST(LayerNorm, StridedInputsAndParameters) {
  // A transposed input and a weight that is every other element of a buffer.
  const Tensor xt = sample({6, 4}, 1).t();  // (4, 6), not contiguous
  const Tensor wbuf = sample({6, 2}, 2), w = wbuf.select(1, 0);
  const Tensor dy = sample({6, 4}, 3).t();
  const Reference ref =
      reference(xt.contiguous(), 6, w.contiguous(), Tensor(), 1e-5, dy.contiguous());
  auto [out, mean, rstd] = native::layer_norm(xt, {6}, w, Tensor(), 1e-5);
  EXPECT_TRUE(AllClose(out, ref.out, 1e-12, 1e-12));
  auto [gi, gw, gb] = native::layer_norm_backward(dy, xt, {6}, mean, rstd, w, {true, true, true});
  EXPECT_TRUE(AllClose(gi, ref.grad_input, 1e-12, 1e-12));
  EXPECT_TRUE(AllClose(gw, ref.grad_weight, 1e-12, 1e-12));
}

// |a - b| <= tol * max |b| elementwise: for values that cancel to near 0.
::testing::AssertionResult CloseToScale(const Tensor& a, const Tensor& b, double tol) {
  return AllClose(a, b, 0, tol * std::max(1e-30, b.abs().max().item<double>()));
}

TEST(LayerNorm, SmallSpreadAgainstLargeMeanKeepsFloat32Precision) {
  // Rows 1000 + O(0.01) in float32: the stored float mean is off by up to
  // 3e-5, which unchecked costs rstd * 3e-5 = 3e-3 in the output and
  // rstd^2 * 3e-5 = 0.3 (relative) in dx; a one-pass sum(x^2) - n mean^2
  // would lose the variance entirely.
  const Tensor x = (sample({8, 256}, 5, kFloat64, -0.01, 0.01) + 1000.0).to(kFloat32);
  const Tensor w = sample({256}, 6, kFloat32), dy = sample({8, 256}, 7, kFloat32);
  const Reference ref =
      reference(x.to(kFloat64), 256, w.to(kFloat64), Tensor(), 1e-5, dy.to(kFloat64));
  auto [out, mean, rstd] = native::layer_norm(x, {256}, w, Tensor(), 1e-5);
  EXPECT_TRUE(CloseToScale(out, ref.out, 1e-5));
  EXPECT_TRUE(AllClose(rstd.reshape({-1}), ref.rstd, 1e-6, 0));
  auto [gi, gw, gb] = native::layer_norm_backward(dy, x, {256}, mean, rstd, w, {true, true, true});
  EXPECT_TRUE(CloseToScale(gi, ref.grad_input, 1e-5));
  EXPECT_TRUE(CloseToScale(gw, ref.grad_weight, 1e-5));
}

TEST(LayerNorm, EmptyInputs) {
  // No rows: empty output; dw and db sum nothing.
  const Tensor x = empty({0, 3}, kFloat64), w = sample({3}, 1);
  auto [out, mean, rstd] = native::layer_norm(x, {3}, w, w, 1e-5);
  EXPECT_EQ(out.sizes(), (IntList{0, 3}));
  EXPECT_EQ(mean.sizes(), (IntList{0, 1}));
  auto [gi, gw, gb] = native::layer_norm_backward(empty({0, 3}, kFloat64), x, {3}, mean, rstd, w,
                                                  {true, true, true});
  EXPECT_EQ(gi.sizes(), (IntList{0, 3}));
  EXPECT_TRUE(AllClose(gw, zeros({3}, kFloat64), 0, 0));
  EXPECT_TRUE(AllClose(gb, zeros({3}, kFloat64), 0, 0));
  // Rows of no values: mean 0, rstd 1 / sqrt(eps).
  auto [out0, mean0, rstd0] =
      native::layer_norm(empty({2, 0}, kFloat64), {0}, Tensor(), Tensor(), 0.25);
  EXPECT_EQ(out0.sizes(), (IntList{2, 0}));
  EXPECT_TRUE(AllClose(mean0, zeros({2, 1}, kFloat64), 0, 0));
  EXPECT_TRUE(AllClose(rstd0, full({2, 1}, 2.0, kFloat64), 0, 0));
}

TEST(LayerNorm, KernelsAreRegisteredPerDevice) {
  EXPECT_TRUE(native::layer_norm_stub.has(kCPU));
  EXPECT_TRUE(native::layer_norm_backward_stub.has(kCPU));
  // The CUDA slots are filled exactly when the CUDA host code was compiled.
  EXPECT_EQ(native::layer_norm_stub.has(kCUDA), cuda::built_with_cuda());
  EXPECT_EQ(native::layer_norm_backward_stub.has(kCUDA), cuda::built_with_cuda());
}

TEST(LayerNorm, ArgumentErrors) {
  const Tensor x = sample({2, 3, 4}, 1);
  EXPECT_LOOM_ERROR(native::layer_norm(Tensor(), {4}, Tensor(), Tensor(), 1e-5), "layer_norm",
                    "input");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {}, Tensor(), Tensor(), 1e-5),
                    "normalized_shape to be at least 1-dimensional");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {5}, Tensor(), Tensor(), 1e-5),
                    "given normalized_shape=[5], expected input with shape [*, 5], but got input "
                    "of size [2, 3, 4]");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {3, 4, 5, 6}, Tensor(), Tensor(), 1e-5),
                    "expected input with shape [*, 3, 4, 5, 6]");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {4, 3}, Tensor(), Tensor(), 1e-5), "[*, 4, 3]");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {4}, sample({3}, 2), Tensor(), 1e-5),
                    "expected weight to be of same shape as normalized_shape, but got weight of "
                    "shape [3] and normalized_shape = [4]");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {3, 4}, Tensor(), sample({12}, 2), 1e-5),
                    "bias of shape [12] and normalized_shape = [3, 4]");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {4}, sample({4}, 2, kFloat32), Tensor(), 1e-5),
                    "weight of dtype float64");
  EXPECT_LOOM_ERROR(native::layer_norm(x.to(kInt64), {4}, Tensor(), Tensor(), 1e-5),
                    "float32 or float64");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {4}, sample({4}, 2).to(Device(kCPU, 1)), Tensor(), 1e-5),
                    "cpu:1");

  auto [out, mean, rstd] = native::layer_norm(x, {4}, Tensor(), Tensor(), 1e-5);
  const std::array<bool, 3> all = {true, true, true};
  EXPECT_LOOM_ERROR(
      native::layer_norm_backward(sample({2, 3}, 3), x, {4}, mean, rstd, Tensor(), all),
      "grad_out of shape [2, 3, 4]");
  EXPECT_LOOM_ERROR(native::layer_norm_backward(x, x, {4}, mean.reshape({-1}).narrow(0, 0, 5), rstd,
                                                Tensor(), all),
                    "mean with 6 values");
  EXPECT_LOOM_ERROR(native::layer_norm_backward(x, x, {4}, mean, rstd.to(kFloat32), Tensor(), all),
                    "rstd with 6 values of dtype float64");
  EXPECT_LOOM_ERROR(native::layer_norm_backward(x, x, {3, 4}, mean, rstd, Tensor(), all),
                    "mean with 2 values");
}

}  // namespace
}  // namespace loom
