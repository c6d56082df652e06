// Layer norm (tensor/cuda/LayerNorm.cu) and group norm (GroupNorm.cu) on
// CUDA against the CPU kernels as the oracle, forward and backward through
// autograd: rows short enough for one warp and long enough for a whole block,
// more rows than one grid covers, normalized_shape of one and two dims, one
// group and one group per channel, (N, C) to 5-D inputs, with and without
// weight/bias, strided inputs, float32 and float64; the statistics and the
// gradients of the raw ops; empty inputs; and the same rejections as the CPU.
// Tagged gpu; every case skips itself where no GPU is visible.
#include <vector>

#include "tensor/native/GroupNorm.h"
#include "tensor/native/LayerNorm.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::CloseScaled;
using testing_cuda::GradParity;
using testing_cuda::kGpu;
using testing_cuda::sample;

class CudaLayerGroupNorm : public testing_cuda::CudaTest {};

const DType kFloats[] = {kFloat32, kFloat64};

// inputs: x, then weight and/or bias as `affine` says (bit 0 weight, bit 1 bias).
std::vector<Tensor> norm_inputs(DType d, const IntList& shape, const IntList& param_shape,
                                int affine, uint64_t seed) {
  std::vector<Tensor> inputs = {sample(d, shape, seed, -3, 5)};
  if (affine & 1) inputs.push_back(sample(d, param_shape, seed + 1));
  if (affine & 2) inputs.push_back(sample(d, param_shape, seed + 2));
  return inputs;
}

Tensor weight_of(const std::vector<Tensor>& in, int affine) {
  return affine & 1 ? in[1] : Tensor();
}
Tensor bias_of(const std::vector<Tensor>& in, int affine) {
  return affine & 2 ? in[affine & 1 ? 2 : 1] : Tensor();
}

TEST_F(CudaLayerGroupNorm, LayerNormForwardBackward) {
  struct Case {
    IntList shape, normalized;
  };
  // Warp rows (N <= 1024), block rows (N > 1024), rows of one value, two
  // normalised dims, many rows (several parameter-gradient chunks).  Rows of
  // one value have dx = 0 up to rounding of terms of size rstd * |w dy|, which
  // a GPU's fused multiply-adds round differently: a larger eps keeps rstd,
  // and that noise, small.
  const std::vector<Case> cases = {
      {{8, 32}, {32}},        {{4, 3, 100}, {100}}, {{3, 3000}, {3000}}, {{7, 1}, {1}},
      {{2, 3, 4, 5}, {4, 5}}, {{5000, 12}, {12}},   {{2, 1025}, {1025}}, {{6}, {6}}};
  for (DType d : kFloats)
    for (const Case& c : cases)
      for (int affine = 0; affine < 4; ++affine)
        EXPECT_TRUE(GradParity(
            [&](const std::vector<Tensor>& in) {
              const double eps = numel_of(c.normalized) == 1 ? 0.1 : 1e-5;
              return layer_norm(in[0], c.normalized, weight_of(in, affine), bias_of(in, affine),
                                eps);
            },
            norm_inputs(d, c.shape, c.normalized, affine, 1)))
            << dtype_name(d) << " " << shape_str(c.shape) << " over " << shape_str(c.normalized)
            << " affine " << affine;
}

TEST_F(CudaLayerGroupNorm, GroupNormForwardBackward) {
  struct Case {
    IntList shape;
    int64_t groups;
  };
  // One group, one group per channel, between; groups of up to 1024 values
  // (a warp per channel in the backward) and beyond (a block).  Groups of one
  // value get a larger eps, as rows of one value above.
  const std::vector<Case> cases = {{{2, 6, 5}, 1},      {{2, 6, 3, 3}, 6}, {{3, 8, 4, 4}, 4},
                                   {{5, 6}, 3},         {{5, 6}, 6},       {{2, 4, 2, 3, 2}, 2},
                                   {{2, 4, 40, 40}, 2}, {{2, 3, 1100}, 3}, {{700, 4, 2}, 2}};
  for (DType d : kFloats)
    for (const Case& c : cases)
      for (int affine = 0; affine < 4; ++affine)
        EXPECT_TRUE(GradParity(
            [&](const std::vector<Tensor>& in) {
              const double eps = numel_of(c.shape) / (c.shape[0] * c.groups) == 1 ? 0.1 : 1e-5;
              return group_norm(in[0], c.groups, weight_of(in, affine), bias_of(in, affine), eps);
            },
            norm_inputs(d, c.shape, {c.shape[1]}, affine, 2)))
            << dtype_name(d) << " " << shape_str(c.shape) << " groups " << c.groups << " affine "
            << affine;
}

TEST_F(CudaLayerGroupNorm, ManyRowsAndStridedInputs) {
  // More rows than one grid of 65535 blocks of 8 warps covers.
  EXPECT_TRUE(GradParity(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], {3}, in[1], in[2], 1e-5); },
      {sample(kFloat32, {530000, 3}, 3), sample(kFloat32, {3}, 4), sample(kFloat32, {3}, 5)}));
  EXPECT_TRUE(GradParity(
      [](const std::vector<Tensor>& in) { return group_norm(in[0], 2, in[1], in[2], 1e-5); },
      {sample(kFloat32, {140000, 4}, 6), sample(kFloat32, {4}, 7), sample(kFloat32, {4}, 8)}));
  for (DType d : kFloats) {
    // Transposed and channels-last views reach the kernels as strided operands.
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) {
          return layer_norm(in[0].t(), {6}, in[1], in[2], 1e-5);
        },
        {sample(d, {6, 9}, 9), sample(d, {6}, 10), sample(d, {6}, 11)}));
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) {
          return group_norm(in[0].permute({0, 3, 1, 2}), 2, in[1], in[2], 1e-5);
        },
        {sample(d, {2, 3, 3, 4}, 12), sample(d, {4}, 13), sample(d, {4}, 14)}));
  }
}

TEST_F(CudaLayerGroupNorm, RawOpsStatisticsAndGradients) {
  for (DType d : kFloats) {
    const Tensor x = sample(d, {4, 3, 50}, 20, -2, 6), w = sample(d, {50}, 21),
                 dy = sample(d, {4, 3, 50}, 22);
    auto [out_c, mean_c, rstd_c] = native::layer_norm(x, {50}, w, Tensor(), 1e-5);
    auto [out_g, mean_g, rstd_g] = native::layer_norm(x.to(kGpu), {50}, w.to(kGpu), Tensor(), 1e-5);
    EXPECT_TRUE(CloseScaled(out_g, out_c));
    EXPECT_TRUE(CloseScaled(mean_g, mean_c));
    EXPECT_TRUE(CloseScaled(rstd_g, rstd_c));
    EXPECT_EQ(mean_g.sizes(), (IntList{4, 3, 1}));
    auto [gi_c, gw_c, gb_c] =
        native::layer_norm_backward(dy, x, {50}, mean_c, rstd_c, w, {true, true, true});
    auto [gi_g, gw_g, gb_g] = native::layer_norm_backward(dy.to(kGpu), x.to(kGpu), {50}, mean_g,
                                                          rstd_g, w.to(kGpu), {true, true, true});
    EXPECT_TRUE(CloseScaled(gi_g, gi_c));
    EXPECT_TRUE(CloseScaled(gw_g, gw_c));
    EXPECT_TRUE(CloseScaled(gb_g, gb_c));

    const Tensor xg = sample(d, {3, 6, 7}, 23, -2, 6), dyg = sample(d, {3, 6, 7}, 24);
    auto [gout_c, gmean_c, grstd_c] = native::group_norm(xg, 3, Tensor(), Tensor(), 1e-5);
    auto [gout_g, gmean_g, grstd_g] = native::group_norm(xg.to(kGpu), 3, Tensor(), Tensor(), 1e-5);
    EXPECT_TRUE(CloseScaled(gout_g, gout_c));
    EXPECT_TRUE(CloseScaled(gmean_g, gmean_c));
    EXPECT_TRUE(CloseScaled(grstd_g, grstd_c));
    // Only grad_weight: the backward skips dx.
    auto [a_c, dw_c, c_c] =
        native::group_norm_backward(dyg, xg, gmean_c, grstd_c, Tensor(), 3, {false, true, false});
    auto [a_g, dw_g, c_g] = native::group_norm_backward(dyg.to(kGpu), xg.to(kGpu), gmean_g, grstd_g,
                                                        Tensor(), 3, {false, true, false});
    EXPECT_FALSE(a_g.defined() || c_g.defined());
    EXPECT_TRUE(CloseScaled(dw_g, dw_c));
  }
}

TEST_F(CudaLayerGroupNorm, EmptyInputs) {
  const Tensor w = sample(kFloat32, {3}, 30);
  auto [out, mean, rstd] = native::layer_norm(empty({0, 3}, TensorOptions(kFloat32).device(kGpu)),
                                              {3}, w.to(kGpu), w.to(kGpu), 1e-5);
  EXPECT_EQ(out.sizes(), (IntList{0, 3}));
  auto [gi, gw, gb] =
      native::layer_norm_backward(empty({0, 3}, TensorOptions(kFloat32).device(kGpu)), out, {3},
                                  mean, rstd, w.to(kGpu), {true, true, true});
  EXPECT_TRUE(CloseScaled(gw, zeros({3}, kFloat32)));
  EXPECT_TRUE(CloseScaled(gb, zeros({3}, kFloat32)));
  auto [gout, gmean, grstd] = native::group_norm(
      empty({2, 4, 0}, TensorOptions(kFloat64).device(kGpu)), 2, Tensor(), Tensor(), 0.25);
  EXPECT_TRUE(CloseScaled(gmean, zeros({2, 2}, kFloat64)));
  EXPECT_TRUE(CloseScaled(grstd, full({2, 2}, 2.0, kFloat64)));
}

TEST_F(CudaLayerGroupNorm, SameRejectionsAsTheCpu) {
  const Tensor x = sample(kFloat32, {2, 6, 4}, 40).to(kGpu);
  EXPECT_LOOM_ERROR(native::layer_norm(x, {5}, Tensor(), Tensor(), 1e-5),
                    "expected input with shape [*, 5]");
  EXPECT_LOOM_ERROR(native::layer_norm(x, {4}, sample(kFloat32, {4}, 41), Tensor(), 1e-5), "cuda:0",
                    "cpu");
  EXPECT_LOOM_ERROR(native::group_norm(x, 4, Tensor(), Tensor(), 1e-5), "divisible by num_groups");
  EXPECT_LOOM_ERROR(native::group_norm(x, 2, Tensor(), sample(kFloat32, {6}, 42), 1e-5), "cuda:0",
                    "cpu");
  EXPECT_LOOM_ERROR(native::group_norm(x, 2, sample(kFloat64, {6}, 43).to(kGpu), Tensor(), 1e-5),
                    "weight of dtype float32");
}

}  // namespace
}  // namespace loom
