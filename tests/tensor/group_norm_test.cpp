// native::group_norm and group_norm_backward on the CPU: values against a
// plain double-precision reference written out below (the formulas of
// torch.nn.functional.group_norm), one group and one group per channel,
// (N, C) to (N, C, D, H, W) inputs, strided inputs, empty inputs, the
// dispatch slots, and every argument error.
#include <cmath>

#include "tensor/native/GroupNorm.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

struct Reference {
  Tensor out, mean, rstd, grad_input, grad_weight, grad_bias;
};

// Straight from the definition, in double.
Reference reference(const Tensor& input, int64_t G, const Tensor& weight, const Tensor& bias,
                    double eps, const Tensor& grad_out) {
  const int64_t N = input.size(0), C = input.size(1), D = C / G;
  const int64_t HxW = N * C != 0 ? input.numel() / (N * C) : 0, L = D * HxW;
  const std::vector<double> x = input.to_vector<double>(), dy = grad_out.to_vector<double>();
  const std::vector<double> w =
      weight.defined() ? weight.to_vector<double>() : std::vector<double>(C, 1.0);
  const std::vector<double> b =
      bias.defined() ? bias.to_vector<double>() : std::vector<double>(C, 0.0);
  std::vector<double> y(x.size()), dx(x.size()), mean(N * G), rstd(N * G), dw(C, 0.0), db(C, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * G + g) * L;
      double s = 0, sq = 0;
      for (int64_t k = 0; k < L; ++k) s += x[base + k];
      const double m = s / L;
      for (int64_t k = 0; k < L; ++k) sq += (x[base + k] - m) * (x[base + k] - m);
      const double r = 1 / std::sqrt(sq / L + eps);
      mean[n * G + g] = m;
      rstd[n * G + g] = r;
      double mg = 0, mgx = 0;
      for (int64_t k = 0; k < L; ++k) {
        const int64_t c = g * D + k / HxW;
        const double xh = (x[base + k] - m) * r, gy = dy[base + k] * w[c];
        y[base + k] = xh * w[c] + b[c];
        mg += gy / L;
        mgx += gy * xh / L;
        dw[c] += dy[base + k] * xh;
        db[c] += dy[base + k];
      }
      for (int64_t k = 0; k < L; ++k) {
        const int64_t c = g * D + k / HxW;
        const double xh = (x[base + k] - m) * r, gy = dy[base + k] * w[c];
        dx[base + k] = r * (gy - mg - xh * mgx);
      }
    }
  return {tensor<double>(y, input.sizes()), tensor<double>(mean, {N, G}),
          tensor<double>(rstd, {N, G}),     tensor<double>(dx, input.sizes()),
          tensor<double>(dw, {C}),          tensor<double>(db, {C})};
}

Tensor sample(IntList sizes, uint64_t seed, DType dtype = kFloat64, double lo = -2, double hi = 3) {
  Generator gen(seed);
  return (rand(sizes, kFloat64, &gen) * (hi - lo) + lo).to(dtype);
}

TEST(GroupNorm, MatchesReferenceForwardAndBackward) {
  struct Case {
    IntList shape;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 6}, 3},          {{2, 6}, 6},         {{3, 4, 5}, 1},
                                   {{3, 4, 5}, 2},       {{2, 6, 3, 4}, 3},   {{2, 6, 3, 4}, 6},
                                   {{1, 4, 2, 3, 2}, 2}, {{2, 2, 40, 40}, 1}, {{4, 8, 1, 1}, 8}};
  for (DType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
    for (const Case& c : cases)
      for (int affine = 0; affine < 4; ++affine) {
        const int64_t C = c.shape[1];
        const Tensor x = sample(c.shape, 1, dtype);
        const Tensor w = affine & 1 ? sample({C}, 2, dtype) : Tensor();
        const Tensor b = affine & 2 ? sample({C}, 3, dtype) : Tensor();
        const Tensor dy = sample(c.shape, 4, dtype);
        const Reference ref = reference(x, c.groups, w, b, 1e-5, dy);
        auto [out, mean, rstd] = native::group_norm(x, c.groups, w, b, 1e-5);
        const std::string what = shape_str(c.shape) + " groups " + std::to_string(c.groups) +
                                 " affine " + std::to_string(affine) + " " + dtype_name(dtype);
        EXPECT_EQ(out.dtype(), dtype) << what;
        EXPECT_EQ(mean.sizes(), (IntList{c.shape[0], c.groups})) << what;
        EXPECT_TRUE(AllClose(out, ref.out, tol, tol)) << what;
        EXPECT_TRUE(AllClose(mean, ref.mean, tol, tol)) << what;
        EXPECT_TRUE(AllClose(rstd, ref.rstd, tol, tol)) << what;
        auto [gi, gw, gb] =
            native::group_norm_backward(dy, x, mean, rstd, w, c.groups, {true, true, true});
        // dx cancels to 0 for groups of one value: rounding noise scales with rstd.
        const double gtol = tol * std::max(1.0, ref.rstd.max().item<double>());
        EXPECT_TRUE(AllClose(gi, ref.grad_input, tol, gtol)) << what;
        EXPECT_TRUE(AllClose(gw, ref.grad_weight, tol * 10, tol)) << what;
        EXPECT_TRUE(AllClose(gb, ref.grad_bias, tol * 10, tol)) << what;
      }
  }
}

TEST(GroupNorm, OutputMaskSkipsGradients) {
  const Tensor x = sample({2, 4, 3}, 1), dy = sample({2, 4, 3}, 3);
  auto [out, mean, rstd] = native::group_norm(x, 2, Tensor(), Tensor(), 1e-5);
  auto [gi, gw, gb] =
      native::group_norm_backward(dy, x, mean, rstd, Tensor(), 2, {true, false, true});
  EXPECT_TRUE(gi.defined());
  EXPECT_FALSE(gw.defined());
  EXPECT_EQ(gb.sizes(), (IntList{4}));
}

TEST(GroupNorm, StridedInputs) {
  // A channels-last input seen as (N, C, H, W).
  const Tensor x = sample({2, 3, 3, 4}, 1).permute({0, 3, 1, 2});  // (2, 4, 3, 3)
  const Tensor dy = sample({2, 3, 3, 4}, 2).permute({0, 3, 1, 2});
  const Tensor w = sample({4, 2}, 3).select(1, 1);
  const Reference ref =
      reference(x.contiguous(), 2, w.contiguous(), Tensor(), 1e-5, dy.contiguous());
  auto [out, mean, rstd] = native::group_norm(x, 2, w, Tensor(), 1e-5);
  EXPECT_TRUE(AllClose(out, ref.out, 1e-12, 1e-12));
  auto [gi, gw, gb] = native::group_norm_backward(dy, x, mean, rstd, w, 2, {true, true, true});
  EXPECT_TRUE(AllClose(gi, ref.grad_input, 1e-12, 1e-12));
  EXPECT_TRUE(AllClose(gw, ref.grad_weight, 1e-12, 1e-12));
  EXPECT_TRUE(AllClose(gb, ref.grad_bias, 1e-12, 1e-12));
}

// |a - b| <= tol * max |b| elementwise: for values that cancel to near 0.
::testing::AssertionResult CloseToScale(const Tensor& a, const Tensor& b, double tol) {
  return AllClose(a, b, 0, tol * std::max(1e-30, b.abs().max().item<double>()));
}

TEST(GroupNorm, SmallSpreadAgainstLargeMeanKeepsFloat32Precision) {
  // Groups 1000 + O(0.01) in float32: see the layer norm test of that name.
  const Tensor x = (sample({2, 6, 50}, 5, kFloat64, -0.01, 0.01) + 1000.0).to(kFloat32);
  const Tensor w = sample({6}, 6, kFloat32), dy = sample({2, 6, 50}, 7, kFloat32);
  const Reference ref =
      reference(x.to(kFloat64), 3, w.to(kFloat64), Tensor(), 1e-5, dy.to(kFloat64));
  auto [out, mean, rstd] = native::group_norm(x, 3, w, Tensor(), 1e-5);
  EXPECT_TRUE(CloseToScale(out, ref.out, 1e-5));
  auto [gi, gw, gb] = native::group_norm_backward(dy, x, mean, rstd, w, 3, {true, true, true});
  EXPECT_TRUE(CloseToScale(gi, ref.grad_input, 1e-5));
  EXPECT_TRUE(CloseToScale(gw, ref.grad_weight, 1e-5));
}

TEST(GroupNorm, EmptyInputs) {
  const Tensor w = sample({4}, 1);
  // No samples: dw and db sum nothing.
  const Tensor x = empty({0, 4, 3}, kFloat64);
  auto [out, mean, rstd] = native::group_norm(x, 2, w, w, 1e-5);
  EXPECT_EQ(out.sizes(), (IntList{0, 4, 3}));
  EXPECT_EQ(mean.sizes(), (IntList{0, 2}));
  auto [gi, gw, gb] = native::group_norm_backward(x, x, mean, rstd, w, 2, {true, true, true});
  EXPECT_EQ(gi.sizes(), (IntList{0, 4, 3}));
  EXPECT_TRUE(AllClose(gw, zeros({4}, kFloat64), 0, 0));
  EXPECT_TRUE(AllClose(gb, zeros({4}, kFloat64), 0, 0));
  // Groups of no values: mean 0, rstd 1 / sqrt(eps).
  const Tensor x0 = empty({2, 4, 0}, kFloat64);
  auto [out0, mean0, rstd0] = native::group_norm(x0, 2, Tensor(), Tensor(), 0.25);
  EXPECT_TRUE(AllClose(mean0, zeros({2, 2}, kFloat64), 0, 0));
  EXPECT_TRUE(AllClose(rstd0, full({2, 2}, 2.0, kFloat64), 0, 0));
  auto [gi0, gw0, gb0] =
      native::group_norm_backward(x0, x0, mean0, rstd0, Tensor(), 2, {true, true, true});
  EXPECT_EQ(gi0.sizes(), (IntList{2, 4, 0}));
  EXPECT_TRUE(AllClose(gw0, zeros({4}, kFloat64), 0, 0));
}

TEST(GroupNorm, KernelsAreRegisteredPerDevice) {
  EXPECT_TRUE(native::group_norm_stub.has(kCPU));
  EXPECT_TRUE(native::group_norm_backward_stub.has(kCPU));
  EXPECT_EQ(native::group_norm_stub.has(kCUDA), cuda::built_with_cuda());
  EXPECT_EQ(native::group_norm_backward_stub.has(kCUDA), cuda::built_with_cuda());
}

TEST(GroupNorm, ArgumentErrors) {
  const Tensor x = sample({2, 6, 4}, 1);
  EXPECT_LOOM_ERROR(native::group_norm(Tensor(), 2, Tensor(), Tensor(), 1e-5), "group_norm",
                    "input");
  EXPECT_LOOM_ERROR(native::group_norm(sample({6}, 1), 2, Tensor(), Tensor(), 1e-5),
                    "at least 2 dimensions");
  EXPECT_LOOM_ERROR(native::group_norm(x, 4, Tensor(), Tensor(), 1e-5),
                    "expected number of channels in input to be divisible by num_groups, but got "
                    "input of shape [2, 6, 4] and num_groups=4");
  EXPECT_LOOM_ERROR(native::group_norm(x, 0, Tensor(), Tensor(), 1e-5),
                    "num_groups must be positive");
  EXPECT_LOOM_ERROR(native::group_norm(x, 2, sample({4}, 2), Tensor(), 1e-5),
                    "expected weight to be a vector of size equal to the number of channels in "
                    "input, but got weight of shape [4] and input of shape [2, 6, 4]");
  EXPECT_LOOM_ERROR(native::group_norm(x, 2, Tensor(), sample({2, 3}, 2), 1e-5),
                    "bias of shape [2, 3]");
  EXPECT_LOOM_ERROR(native::group_norm(x, 2, Tensor(), sample({6}, 2, kFloat32), 1e-5),
                    "bias of dtype float64");
  EXPECT_LOOM_ERROR(native::group_norm(x.to(kInt32), 2, Tensor(), Tensor(), 1e-5),
                    "float32 or float64");
  EXPECT_LOOM_ERROR(native::group_norm(x, 2, sample({6}, 2).to(Device(kCPU, 1)), Tensor(), 1e-5),
                    "cpu:1");

  auto [out, mean, rstd] = native::group_norm(x, 2, Tensor(), Tensor(), 1e-5);
  const std::array<bool, 3> all = {true, true, true};
  EXPECT_LOOM_ERROR(native::group_norm_backward(sample({2, 6}, 3), x, mean, rstd, Tensor(), 2, all),
                    "grad_out of shape [2, 6, 4]");
  EXPECT_LOOM_ERROR(native::group_norm_backward(x, x, mean, rstd, Tensor(), 3, all),
                    "mean with 6 values (N * num_groups)");
  EXPECT_LOOM_ERROR(native::group_norm_backward(x, x, mean, rstd.to(kFloat32), Tensor(), 2, all),
                    "rstd with 4 values");
}

}  // namespace
}  // namespace loom
