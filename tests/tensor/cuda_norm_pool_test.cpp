// Batch norm (tensor/cuda/BatchNorm.cu) and pooling (tensor/cuda/Pooling.cu)
// on CUDA against the CPU kernels as the oracle, forward and backward through
// autograd: batch norm training (batch statistics, running-stat update with
// momentum and the unbiased variance, in place into strided running tensors
// too; channels long enough to be cut into tiles) and eval, with and without weight/bias, 2-D to 5-D inputs; max pooling
// with its indices (equal to the CPU's, NaN and ties included), padding,
// dilation, ceil_mode; average pooling with and without count_include_pad;
// adaptive average pooling to larger, smaller and odd sizes; unbatched and
// non-contiguous inputs, float32 and float64; errors.  Tagged gpu; every case
// skips itself where no GPU is visible.
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/native/Normalization.h"
#include "tensor/native/Pooling.h"
#include "tests/BatchNormFarMean.h"
#include "tests/CudaBatchNormFusion.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::CloseScaled;
using testing_cuda::GradParity;
using testing_cuda::GradParityMulti;
using testing_cuda::kGpu;
using testing_cuda::sample;

class CudaNormPool : public testing_cuda::CudaTest {};

const DType kFloats[] = {kFloat32, kFloat64};

// ---- batch norm --------------------------------------------------------------------------

TEST_F(CudaNormPool, BatchNormTrainingUpdatesRunningStats) {
  const std::vector<IntList> shapes = {{8, 3}, {4, 5, 7}, {2, 3, 5, 6}, {2, 2, 3, 4, 5}, {3, 1, 1, 1}};
  for (DType d : kFloats)
    for (const IntList& shape : shapes)
      for (bool affine : {true, false}) {
        const int64_t C = shape[1];
        const Tensor rm = sample(d, {C}, 1), rv = sample(d, {C}, 2, 0.5, 2.0);
        Tensor rm_c = rm.clone(), rv_c = rv.clone();
        Tensor rm_g = rm.to(kGpu), rv_g = rv.to(kGpu);
        std::vector<Tensor> inputs = {sample(d, shape, 3, -3, 5)};
        if (affine) {
          inputs.push_back(sample(d, {C}, 4));
          inputs.push_back(sample(d, {C}, 5));
        }
        EXPECT_TRUE(GradParity(
            [&](const std::vector<Tensor>& in) {
              const bool gpu = in[0].is_cuda();
              return batch_norm(in[0], gpu ? rm_g : rm_c, gpu ? rv_g : rv_c,
                                affine ? in[1] : Tensor(), affine ? in[2] : Tensor(), true, 0.3,
                                1e-5);
            },
            inputs))
            << dtype_name(d) << " " << shape_str(shape) << (affine ? " affine" : "");
        EXPECT_TRUE(CloseScaled(rm_g, rm_c)) << "running_mean " << shape_str(shape);
        EXPECT_TRUE(CloseScaled(rv_g, rv_c)) << "running_var " << shape_str(shape);
      }
}

// Channels long enough to be cut into tiles over the batch and the spatial
// run (BatchNormPlan.h), values far from zero (mean 100): statistics,
// running stats and gradients as the CPU's.
TEST_F(CudaNormPool, BatchNormTiledChannels) {
  const std::vector<IntList> shapes = {{32, 3, 64, 64}, {2, 2, 200, 300}, {1, 1, 100000}};
  for (DType d : kFloats)
    for (const IntList& shape : shapes) {
      const int64_t C = shape[1];
      const Tensor rm = sample(d, {C}, 1), rv = sample(d, {C}, 2, 0.5, 2.0);
      Tensor rm_c = rm.clone(), rv_c = rv.clone();
      Tensor rm_g = rm.to(kGpu), rv_g = rv.to(kGpu);
      EXPECT_TRUE(GradParity(
          [&](const std::vector<Tensor>& in) {
            const bool gpu = in[0].is_cuda();
            return batch_norm(in[0], gpu ? rm_g : rm_c, gpu ? rv_g : rv_c, in[1], in[2], true,
                              0.1, 1e-5);
          },
          {sample(d, shape, 3, 99, 101), sample(d, {C}, 4), sample(d, {C}, 5)}))
          << dtype_name(d) << " " << shape_str(shape);
      EXPECT_TRUE(CloseScaled(rm_g, rm_c)) << "running_mean " << shape_str(shape);
      EXPECT_TRUE(CloseScaled(rv_g, rv_c)) << "running_var " << shape_str(shape);
    }
}

TEST_F(CudaNormPool, BatchNormEvalAndStridedRunningStats) {
  for (DType d : kFloats) {
    const Tensor rm = sample(d, {4}, 1), rv = sample(d, {4}, 2, 0.5, 2.0);
    EXPECT_TRUE(GradParity(
        [&](const std::vector<Tensor>& in) {
          const bool gpu = in[0].is_cuda();
          return batch_norm(in[0], gpu ? rm.to(kGpu) : rm, gpu ? rv.to(kGpu) : rv, in[1], in[2],
                            false, 0.1, 1e-3);
        },
        {sample(d, {3, 4, 5, 5}, 3), sample(d, {4}, 4), sample(d, {4}, 5)}));
    // Running stats that are every other element of a longer buffer, and a
    // channels-last (non-contiguous) input.
    Tensor buf_c = sample(d, {4, 2}, 6, 0.5, 1.5), buf_g = buf_c.to(kGpu);
    EXPECT_TRUE(GradParity(
        [&](const std::vector<Tensor>& in) {
          const Tensor& buf = in[0].is_cuda() ? buf_g : buf_c;
          return batch_norm(in[0].permute({0, 3, 1, 2}), buf.select(1, 0), buf.select(1, 1),
                            Tensor(), Tensor(), true, 0.1, 1e-5);
        },
        {sample(d, {3, 5, 6, 4}, 7)}));
    EXPECT_TRUE(CloseScaled(buf_g, buf_c));
  }
}

// A channel whose mean dwarfs its spread (tests/BatchNormFarMean.h): the
// GPU's float32 input gradient stays within 1e-5 of the CPU's float64 one,
// as the CPU's float32 one does (batchnorm_test), in both layouts.
TEST_F(CudaNormPool, BatchNormBackwardKeepsChannelsWhoseMeanDwarfsTheirSpread) {
  const testing::FarMeanCase c = testing::far_mean_case();
  for (bool channels_last : {false, true}) {
    const MemoryFormat format = channels_last_if(channels_last);
    const Tensor x = c.input.contiguous(format), go = c.grad_output.contiguous(format);
    const auto [gi, gw, gb] =
        testing::batch_norm_gradients(x.to(kGpu), go.to(kGpu), c.weight.to(kGpu));
    const auto [gi64, gw64, gb64] = testing::batch_norm_gradients(
        x.to(kFloat64), go.to(kFloat64), c.weight.to(kFloat64));
    ASSERT_EQ(gi.sizes(), gi64.sizes());
    const auto [worst, scale] = testing::worst_error_and_scale(gi.cpu(), gi64);
    EXPECT_LT(worst, 1e-5 * scale) << (channels_last ? "channels last" : "contiguous")
                                   << ": worst error " << worst << " of " << scale;
    EXPECT_TRUE(testing::AllClose(gw.cpu(), gw64, 1e-5, 1e-5));
    EXPECT_TRUE(testing::AllClose(gb.cpu(), gb64, 1e-6, 1e-6));
  }
}

// The GPU kernels fuse the ReLU and the residual add (as the CPU's): the
// same values as batch norm, `+` and ReLU run as separate ops on the GPU,
// running statistics and every gradient included (the residual's too), for
// each dtype the kernels take, training and eval, a small input and one
// whose channels are cut into tiles.
TEST_F(CudaNormPool, BatchNormFusesTheReluAndTheResidualAdd) {
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
    for (const IntList& shape : {IntList{3, 4, 5, 6}, IntList{2, 3, 150, 160}})
      for (bool training : {true, false})
        for (bool add : {false, true})
          EXPECT_TRUE(testing_cuda::FusedBatchNormIsTheSeparateOps(d, shape, training, add,
                                                                   MemoryFormat::kContiguous))
              << dtype_name(d) << " " << shape_str(shape) << (training ? " train" : " eval")
              << (add ? " add+relu" : " relu");
}

TEST_F(CudaNormPool, BatchNormErrors) {
  const Tensor x = sample(kFloat32, {1, 3}, 1).to(kGpu);
  EXPECT_LOOM_ERROR(native::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5),
                    "more than 1 value per channel");
  const Tensor y = sample(kFloat32, {4, 3}, 1).to(kGpu);
  EXPECT_LOOM_ERROR(native::batch_norm(y, Tensor(), Tensor(), sample(kFloat32, {3}, 2), Tensor(),
                                       true, 0.1, 1e-5),
                    "cuda:0", "cpu");
}

// ---- pooling -----------------------------------------------------------------------------

struct MaxCase {
  IntList input, kernel, stride, padding, dilation;
  bool ceil_mode;
};

TEST_F(CudaNormPool, MaxPoolValuesIndicesAndGrads) {
  const std::vector<MaxCase> cases = {
      {{2, 3, 8, 8}, {2}, {}, {0}, {1}, false},
      {{2, 3, 9, 7}, {3}, {2}, {1}, {1}, false},
      {{1, 2, 10, 11}, {3, 2}, {2, 3}, {1, 1}, {2, 1}, true},
      {{3, 7, 7}, {3}, {2}, {1}, {1}, true},  // unbatched, ceil_mode
      {{2, 1, 5, 5}, {5}, {1}, {2}, {1}, false},
  };
  for (DType d : kFloats)
    for (size_t i = 0; i < cases.size(); ++i) {
      const MaxCase& c = cases[i];
      EXPECT_TRUE(GradParityMulti(
          [&](const std::vector<Tensor>& in) {
            auto [out, idx] =
                max_pool2d_with_indices(in[0], c.kernel, c.stride, c.padding, c.dilation,
                                        c.ceil_mode);
            return std::vector<Tensor>{out, idx};
          },
          {sample(d, c.input, i)}))
          << dtype_name(d) << " case " << i;
    }
}

TEST_F(CudaNormPool, MaxPoolTiesNanAndOverlappingWindows) {
  // Integer-valued input: many ties (the first index wins); NaN wins; the
  // overlapping 3x3/stride-1 windows send several gradients to one maximum.
  Tensor x = sample(kInt64, {2, 2, 6, 6}, 1).to(kFloat64);
  x.select(0, 1).select(0, 1).select(0, 2).select(0, 3).fill_(std::numeric_limits<double>::quiet_NaN());
  for (DType d : kFloats)
    EXPECT_TRUE(GradParityMulti(
        [](const std::vector<Tensor>& in) {
          auto [out, idx] = max_pool2d_with_indices(in[0], {3}, {1}, {1}, {1}, false);
          return std::vector<Tensor>{out, idx};
        },
        {x.to(kFloat64).to(d)}));
  // Ties only, float32, through max_pool2d.
  const Tensor clean = sample(kInt64, {2, 3, 7, 5}, 2).to(kFloat32);
  EXPECT_TRUE(GradParity([](const std::vector<Tensor>& in) { return max_pool2d(in[0], {3}, {1}, {1}); },
                         {clean}));
}

TEST_F(CudaNormPool, AvgPoolEveryMode) {
  struct AvgCase {
    IntList input, kernel, stride, padding;
  };
  const std::vector<AvgCase> cases = {
      {{2, 3, 8, 8}, {2}, {}, {0}},
      {{2, 3, 9, 7}, {3}, {2}, {1}},
      {{1, 2, 10, 11}, {3, 4}, {2, 3}, {1, 2}},
      {{3, 7, 6}, {3}, {2}, {1}},  // unbatched
  };
  for (DType d : kFloats)
    for (size_t i = 0; i < cases.size(); ++i)
      for (bool ceil_mode : {false, true})
        for (bool include_pad : {true, false}) {
          const AvgCase& c = cases[i];
          EXPECT_TRUE(GradParity(
              [&](const std::vector<Tensor>& in) {
                return avg_pool2d(in[0], c.kernel, c.stride, c.padding, ceil_mode, include_pad);
              },
              {sample(d, c.input, i)}))
              << dtype_name(d) << " case " << i << (ceil_mode ? " ceil" : "")
              << (include_pad ? " include_pad" : "");
        }
  // A channels-last (non-contiguous) input.
  EXPECT_TRUE(GradParity(
      [](const std::vector<Tensor>& in) { return avg_pool2d(in[0].permute({0, 3, 1, 2}), {2}); },
      {sample(kFloat32, {2, 6, 6, 3}, 9)}));
}

TEST_F(CudaNormPool, AdaptiveAvgPoolSizes) {
  const std::vector<std::pair<IntList, IntList>> cases = {
      {{2, 3, 8, 8}, {1}},     {{2, 3, 9, 7}, {4, 3}}, {{1, 2, 5, 5}, {7, 8}},
      {{3, 10, 13}, {3, 5}},   {{2, 2, 6, 6}, {6}},    {{2, 2, 4, 4}, {0, 3}},
  };
  for (DType d : kFloats)
    for (const auto& [in_shape, out_size] : cases)
      EXPECT_TRUE(GradParity(
          [&](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], out_size); },
          {sample(d, in_shape, 3)}))
          << dtype_name(d) << " " << shape_str(in_shape) << " -> " << shape_str(out_size);
  EXPECT_TRUE(GradParity(
      [](const std::vector<Tensor>& in) {
        return adaptive_avg_pool2d(in[0].transpose(2, 3), {3, 2});
      },
      {sample(kFloat64, {2, 3, 7, 9}, 4)}));
}

TEST_F(CudaNormPool, PoolingErrors) {
  const Tensor x = sample(kFloat32, {2, 3, 4, 4}, 1).to(kGpu);
  EXPECT_LOOM_ERROR(native::max_pool2d_with_indices(x, {3}, {1}, {2}, {1}, false),
                    "pad should be at most half");
  EXPECT_LOOM_ERROR(native::avg_pool2d(x, {5}, {}, {0}, false, true), "too small");
  auto [out, idx] = native::max_pool2d_with_indices(x, {2}, {}, {0}, {1}, false);
  EXPECT_LOOM_ERROR(
      native::max_pool2d_backward(out, x.sizes(), {2}, {}, {0}, {1}, false, idx.cpu()), "cuda:0",
      "cpu");
}

}  // namespace
}  // namespace loom
