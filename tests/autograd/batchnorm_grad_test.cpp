// Finite-difference gradchecks for batch_norm in training (batch statistics
// depend on the input) and eval mode, with and without affine parameters.
// Running statistics are recreated per evaluation so finite differences see
// the same function each time.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

TEST(BatchNormGrad, TrainingInputWeightBias) {
  EXPECT_TRUE(GradOk(
      [](const Inputs& x) {
        Tensor rm = zeros({2}, kFloat64), rv = ones({2}, kFloat64);
        // Weighted so the gradient is not trivially zero.
        return batch_norm(x[0], rm, rv, x[1], x[2], true, 0.1, 1e-5) * x[3];
      },
      {random_leaf({3, 2, 2, 2}, 1), random_leaf({2}, 2), random_leaf({2}, 3),
       random_leaf({3, 2, 2, 2}, 4).detach()}));
}

TEST(BatchNormGrad, TrainingTwoAndThreeDims) {
  const Tensor scale2 = random_leaf({4, 3}, 5).detach();
  EXPECT_TRUE(GradOk(
      [&](const Inputs& x) {
        return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-3) * scale2;
      },
      {random_leaf({4, 3}, 6), random_leaf({3}, 7), random_leaf({3}, 8)}));
  const Tensor scale3 = random_leaf({2, 2, 3}, 9).detach();
  EXPECT_TRUE(GradOk(
      [&](const Inputs& x) {
        return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-3) * scale3;
      },
      {random_leaf({2, 2, 3}, 10)}));
}

TEST(BatchNormGrad, TrainingNonContiguousInput) {
  const Tensor scale = random_leaf({2, 3, 2, 2}, 11).detach();
  EXPECT_TRUE(GradOk(
      [&](const Inputs& x) {
        return batch_norm(x[0], Tensor(), Tensor(), x[1], Tensor(), true, 0.1, 1e-5) * scale;
      },
      {random_leaf({2, 2, 2, 3}, 12).permute({0, 3, 1, 2}), random_leaf({3}, 13)}));
}

// batch_norm_relu: the ReLU's mask from the fused output, then batch norm's
// gradients; NCHW and channels last, training and eval.
TEST(BatchNormGrad, FusedRelu) {
  const Tensor scale = random_leaf({3, 2, 3, 2}, 17).detach();
  for (bool channels_last : {false, true})
    for (bool training : {true, false}) {
      EXPECT_TRUE(GradOk(
          [&](const Inputs& x) {
            const Tensor rm = tensor<double>({0.1, -0.3}), rv = tensor<double>({0.8, 1.7});
            const Tensor in = channels_last ? x[0].contiguous(MemoryFormat::kChannelsLast) : x[0];
            return batch_norm_relu(in, rm.clone(), rv.clone(), x[1], x[2], training, 0.1, 1e-5) *
                   scale;
          },
          {random_leaf({3, 2, 3, 2}, 18), random_leaf({2}, 19), random_leaf({2}, 20)}))
          << (channels_last ? "channels last " : "") << (training ? "training" : "eval");
    }
}

TEST(BatchNormGrad, FusedAddRelu) {
  const Tensor scale = random_leaf({3, 2, 3, 2}, 21).detach();
  for (bool channels_last : {false, true})
    for (bool training : {true, false}) {
      EXPECT_TRUE(GradOk(
          [&](const Inputs& x) {
            const Tensor rm = tensor<double>({0.1, -0.3}), rv = tensor<double>({0.8, 1.7});
            const MemoryFormat format = channels_last_if(channels_last);
            return batch_norm_add_relu(x[0].contiguous(format), x[3].contiguous(format),
                                       rm.clone(), rv.clone(), x[1], x[2], training, 0.1, 1e-5) *
                   scale;
          },
          {random_leaf({3, 2, 3, 2}, 22), random_leaf({2}, 23), random_leaf({2}, 24),
           random_leaf({3, 2, 3, 2}, 25)}))
          << (channels_last ? "channels last " : "") << (training ? "training" : "eval");
    }
}

TEST(BatchNormGrad, Eval) {
  const Tensor rm = tensor<double>({0.1, -0.3}), rv = tensor<double>({0.8, 1.7});
  EXPECT_TRUE(GradOk(
      [&](const Inputs& x) {
        return batch_norm(x[0], rm, rv, x[1], x[2], false, 0.1, 1e-5);
      },
      {random_leaf({3, 2, 2}, 14), random_leaf({2}, 15), random_leaf({2}, 16)}));
}

}  // namespace
}  // namespace loom
