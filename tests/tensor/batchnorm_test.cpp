// batch_norm forward values, running-statistics updates and errors.  Expected
// values were computed with PyTorch 1.13 (F.batch_norm) on the same inputs.
#include <cmath>
#include <functional>
#include <string>

#include "tensor/native/Normalization.h"
#include "tensor/native/Unary.h"
#include "tests/BatchNormFarMean.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor pat(int64_t n, int64_t mul, int64_t mod, IntList shape, DType dtype = kFloat64) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * mul) % mod) / mod - 0.5;
  return tensor<double>(v, shape).to(dtype);
}

const std::vector<double> kTrainOut = {
    -1.5829232, 0.3841163,  2.3511558, -0.8676361, 0.9782836,  0.1412438,  1.5109453, 0.6739055,
    -1.4041014, 0.5629381,  2.5299776, -0.6888143, 0.9021891,  0.0651492,  1.4348508, 0.5978109,
    -1.2252796, 0.7417599,  2.7087994, -0.5099925, 0.8260945,  -0.0109453, 1.3587562, 0.5217164};

TEST(BatchNorm, TrainingMatchesPyTorchAndUpdatesRunningStats) {
  for (DType dtype : {kFloat64, kFloat32}) {
    const Tensor x = pat(24, 11, 29, {3, 2, 2, 2}, dtype);
    Tensor rm = tensor<double>({0.1, -0.2}).to(dtype), rv = tensor<double>({1.5, 0.5}).to(dtype);
    const Tensor w = tensor<double>({1.5, -0.5}).to(dtype), b = tensor<double>({0.25, 0.75}).to(dtype);
    const uint64_t v0 = rm.version(), v1 = rv.version();
    const Tensor y = batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    EXPECT_TRUE(AllClose(y, tensor<double>(kTrainOut, {3, 2, 2, 2}), 1e-5, 1e-5));
    EXPECT_TRUE(AllClose(rm, tensor<double>({0.0753448, -0.167931}), 1e-5, 1e-6));
    EXPECT_TRUE(AllClose(rv, tensor<double>({1.359126, 0.4555994}), 1e-5, 1e-6));
    EXPECT_GT(rm.version(), v0);
    EXPECT_GT(rv.version(), v1);
  }
}

TEST(BatchNorm, EvalUsesRunningStats) {
  const Tensor x = pat(24, 11, 29, {3, 2, 2, 2});
  const Tensor rm = tensor<double>({0.0753448, -0.167931}), rv = tensor<double>({1.359126, 0.4555994});
  const Tensor y = batch_norm(x, rm, rv, tensor<double>({1.5, -0.5}), tensor<double>({0.25, 0.75}),
                              false, 0.1, 1e-5);
  EXPECT_TRUE(AllClose(
      y,
      tensor<double>({-0.4902663, -0.0022274, 0.4858115, -0.3127976, 0.6128329, 0.3318575,
                      0.7916355, 0.51066, -0.4458992, 0.0421398, 0.5301787, -0.2684305,
                      0.5872897, 0.3063142, 0.7660922, 0.4851168, -0.401532, 0.086507, 0.5745459,
                      -0.2240633, 0.5617465, 0.280771, 0.740549, 0.4595736},
                     {3, 2, 2, 2}),
      1e-5, 1e-6));
  // Eval leaves the running stats alone.
  EXPECT_TRUE(AllClose(rm, tensor<double>({0.0753448, -0.167931}), 0, 0));
}

TEST(BatchNorm, TwoDimensionalInputWithoutAffine) {
  const Tensor x = pat(12, 5, 13, {4, 3});
  Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
  const Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.3, 1e-3);
  EXPECT_TRUE(AllClose(y,
                       tensor<double>({-1.3195261, -1.3195261, 0.7562553, -0.439842, -0.439842,
                                       1.1884012, 0.439842, 0.439842, -1.1884012, 1.3195261,
                                       1.3195261, -0.7562553},
                                      {4, 3}),
                       1e-5, 1e-6));
  EXPECT_TRUE(AllClose(rm, tensor<double>({-0.0807692, 0.0346154, 0.0}), 1e-5, 1e-6));
  EXPECT_TRUE(AllClose(rv, tensor<double>({0.7118343, 0.7118343, 0.7502959}), 1e-5, 1e-6));
  // Without running stats, training still normalises with the batch statistics.
  EXPECT_TRUE(AllClose(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.3, 1e-3), y,
                       1e-12, 1e-12));
}

TEST(BatchNorm, RunningStatsUpdateIsNotRecorded) {
  const Tensor x = pat(24, 11, 29, {3, 2, 4}).requires_grad_();
  Tensor rm = zeros({2}, kFloat64), rv = ones({2}, kFloat64);
  const Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rv.requires_grad());
  // Normalised output: zero mean per channel, so the gradient of sum(y) is ~0.
  y.sum().backward();
  for (double g : x.grad().to_vector<double>()) EXPECT_NEAR(g, 0.0, 1e-9);
}

// batch_norm_relu fuses the ReLU into the pass that writes the output: the
// same bits as relu(batch_norm(...)), running statistics included, for every
// dtype and layout the kernels take, training and eval, NaN kept.
TEST(BatchNorm, FusedReluIsReluOfBatchNorm) {
  for (DType dtype : {kFloat64, kFloat32, kBFloat16})
    for (bool channels_last : {false, true})
      for (bool training : {true, false}) {
        Tensor x = pat(2 * 3 * 5 * 4, 7, 31, {2, 3, 5, 4}, dtype);
        if (channels_last) x = x.contiguous(MemoryFormat::kChannelsLast);
        const DType stats = dtype == kBFloat16 ? kFloat32 : dtype;
        const Tensor w = tensor<double>({1.5, -0.5, 0.7}).to(stats);
        const Tensor b = tensor<double>({0.25, 0.1, -0.3}).to(stats);
        Tensor rm1 = tensor<double>({0.1, -0.2, 0.0}).to(stats), rv1 = ones({3}, stats);
        Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
        const Tensor fused = batch_norm_relu(x, rm1, rv1, w, b, training, 0.1, 1e-5);
        const Tensor plain = batch_norm(x, rm2, rv2, w, b, training, 0.1, 1e-5).relu();
        const std::string what = std::string(dtype_name(dtype)) +
                                 (channels_last ? " channels last" : "") +
                                 (training ? " train" : " eval");
        EXPECT_EQ(fused.dtype(), dtype);
        EXPECT_EQ(fused.strides(), plain.strides()) << what;
        EXPECT_TRUE(AllClose(fused, plain, 0, 0)) << what;
        EXPECT_TRUE(AllClose(rm1, rm2, 0, 0)) << what;
        EXPECT_TRUE(AllClose(rv1, rv2, 0, 0)) << what;
      }
  // NaN stays NaN, as ReLU's.
  Tensor x = pat(8, 3, 7, {2, 1, 2, 2}, kFloat32);
  static_cast<float*>(x.data_ptr())[3] = std::nanf("");
  const Tensor y = batch_norm_relu(x, zeros({1}), ones({1}), Tensor(), Tensor(), false, 0.1, 1e-5);
  const std::vector<double> v = y.to_vector<double>();
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(v[0], 0.0);  // -0.5 normalised, then ReLU
  EXPECT_GT(v[2], 0.0);
}

// One case of the fused kernels' tests (FusedRelu*, FusedAddRelu*).
struct FusedCase {
  IntList shape;
  int64_t numel, channels;
  DType dtype, stats;  // the activations' and the parameters' dtypes
  MemoryFormat format;
  bool training;
  std::string what;  // for failure messages
};

// Every case the fused kernels take: a small input and one whose channels
// are too long for the bfloat16 kernels' one-read cache, three dtypes, both
// layouts, training and eval.
void for_each_fused_case(const std::function<void(const FusedCase&)>& fn) {
  for (IntList shape : {IntList{2, 3, 5, 4}, IntList{2, 2, 190, 200}})
    for (DType dtype : {kFloat64, kFloat32, kBFloat16})
      for (bool channels_last : {false, true})
        for (bool training : {true, false}) {
          FusedCase c{shape, 1, shape[1], dtype, dtype == kBFloat16 ? kFloat32 : dtype,
                      channels_last_if(channels_last), training, ""};
          for (int64_t d : shape) c.numel *= d;
          c.what = shape_str(shape) + " " + dtype_name(dtype) +
                   (channels_last ? " channels last" : "") + (training ? " train" : " eval");
          fn(c);
        }
}

// The backward of batch_norm_relu masks the output gradient inside batch
// norm's passes: the same bits as ReLU's backward first, then batch norm's,
// for every dtype and layout the kernels take, training and eval, for a
// small input and one whose channels are too long for the bfloat16 kernels'
// one-read cache; a NaN output masks its gradient as ReLU's backward does.
TEST(BatchNorm, FusedReluBackwardIsBatchNormBackwardOfTheMaskedGradient) {
  for_each_fused_case([](const FusedCase& c) {
    const int64_t C = c.channels;
    const Tensor x = pat(c.numel, 7, 31, c.shape, c.dtype).contiguous(c.format);
    const Tensor go = pat(c.numel, 5, 23, c.shape, c.dtype).contiguous(c.format);
    const Tensor w = pat(C, 3, 7, {C}, c.stats) + 1.0, b = pat(C, 2, 5, {C}, c.stats);
    Tensor rm = zeros({C}, c.stats), rv = ones({C}, c.stats);
    const auto stats_of = native::batch_norm(x, rm, rv, w, b, c.training, 0.1, 1e-5, true);
    const Tensor& mean = std::get<1>(stats_of);
    const Tensor& invstd = std::get<2>(stats_of);
    // A ReLU output: zeros, positives, and a NaN (masks like a zero).
    Tensor y = (x * 3.0).relu().contiguous(c.format);
    if (c.dtype == kFloat32) static_cast<float*>(y.data_ptr())[1] = std::nanf("");
    if (c.dtype == kFloat64) static_cast<double*>(y.data_ptr())[1] = std::nan("");
    if (c.dtype == kBFloat16) static_cast<uint16_t*>(y.data_ptr())[1] = 0x7FC0;
    const Tensor masked = native::unary_backward(native::unary_op<optable::Relu>(), go, y, {});
    Tensor gi1, gw1, gb1, gi2, gw2, gb2;
    native::batch_norm_backward(go, x, w, mean, invstd, c.training, true, true, true, gi1, gw1,
                                gb1, y);
    native::batch_norm_backward(masked, x, w, mean, invstd, c.training, true, true, true, gi2,
                                gw2, gb2);
    EXPECT_EQ(gi1.strides(), gi2.strides()) << c.what;
    EXPECT_TRUE(AllClose(gi1, gi2, 0, 0)) << c.what;
    EXPECT_TRUE(AllClose(gw1, gw2, 0, 0)) << c.what;
    EXPECT_TRUE(AllClose(gb1, gb2, 0, 0)) << c.what;
  });
}

// Through autograd: batch_norm_relu's gradients are relu(batch_norm(...))'s.
TEST(BatchNorm, FusedReluGradientsAreThoseOfReluAfterBatchNorm) {
  for (DType dtype : {kFloat32, kBFloat16})
    for (bool channels_last : {false, true}) {
      const MemoryFormat format = channels_last_if(channels_last);
      const DType stats = dtype == kBFloat16 ? kFloat32 : dtype;
      const Tensor x0 = pat(4 * 6 * 7 * 5, 7, 31, {4, 6, 7, 5}, dtype).contiguous(format);
      const Tensor go = pat(4 * 6 * 7 * 5, 5, 23, {4, 6, 7, 5}, dtype).contiguous(format);
      std::vector<Tensor> grads[2];
      for (int fused = 0; fused < 2; ++fused) {
        const Tensor x = x0.clone().requires_grad_();
        const Tensor w = (pat(6, 3, 7, {6}, stats) + 1.0).requires_grad_();
        const Tensor b = pat(6, 2, 5, {6}, stats).requires_grad_();
        const Tensor y = fused ? batch_norm_relu(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5)
                               : batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5).relu();
        y.backward(go);
        grads[fused] = {x.grad(), w.grad(), b.grad()};
      }
      for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(AllClose(grads[1][i], grads[0][i], 0, 0))
            << dtype_name(dtype) << (channels_last ? " channels last" : "") << " gradient " << i;
    }
}

// batch_norm_add_relu adds the residual and applies the ReLU in batch
// norm's output pass: the same bits as relu(batch_norm(...) + residual)
// (bfloat16 rounded between the two as the separate ops round), running
// statistics included, both layouts, training and eval; the same gradients,
// the residual's included.
TEST(BatchNorm, FusedAddReluIsReluOfBatchNormPlusResidual) {
  for_each_fused_case([](const FusedCase& c) {
    const int64_t C = c.channels;
    const Tensor x0 = pat(c.numel, 7, 31, c.shape, c.dtype).contiguous(c.format);
    const Tensor r0 = pat(c.numel, 5, 23, c.shape, c.dtype).contiguous(c.format);
    const Tensor go = pat(c.numel, 3, 19, c.shape, c.dtype).contiguous(c.format);
    Tensor outs[2], rms[2];
    std::vector<Tensor> grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      const Tensor x = x0.clone().requires_grad_(), r = r0.clone().requires_grad_();
      const Tensor w = (pat(C, 3, 7, {C}, c.stats) + 1.0).requires_grad_();
      const Tensor b = pat(C, 2, 5, {C}, c.stats).requires_grad_();
      Tensor rm = tensor<double>(std::vector<double>(C, 0.1)).to(c.stats);
      Tensor rv = ones({C}, c.stats);
      outs[fused] = fused ? batch_norm_add_relu(x, r, rm, rv, w, b, c.training, 0.1, 1e-5)
                          : (batch_norm(x, rm, rv, w, b, c.training, 0.1, 1e-5) + r).relu();
      outs[fused].backward(go);
      rms[fused] = rm;
      grads[fused] = {x.grad(), r.grad(), w.grad(), b.grad()};
    }
    EXPECT_EQ(outs[1].dtype(), c.dtype) << c.what;
    EXPECT_EQ(outs[1].strides(), outs[0].strides()) << c.what;
    EXPECT_TRUE(AllClose(rms[1], rms[0], 0, 0)) << c.what;
    EXPECT_TRUE(AllClose(outs[1], outs[0], 0, 0)) << c.what;
    for (int i = 0; i < 4; ++i)
      EXPECT_TRUE(AllClose(grads[1][i], grads[0][i], 0, 0)) << c.what << " gradient " << i;
  });
}

// A residual the kernels cannot add in their pass (another dtype) goes
// through batch norm, `+` (promoting) and ReLU; a residual of another shape
// is an error.
TEST(BatchNorm, FusedAddReluFallsBackAndChecksTheResidual) {
  const Tensor x = pat(2 * 3 * 4 * 4, 7, 31, {2, 3, 4, 4}, kBFloat16);
  const Tensor r = pat(2 * 3 * 4 * 4, 5, 23, {2, 3, 4, 4}, kFloat32);
  const Tensor y = batch_norm_add_relu(x, r, Tensor(), Tensor(), Tensor(), Tensor(), true);
  const Tensor expected = (batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true) + r).relu();
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(AllClose(y, expected, 0, 0));
  EXPECT_LOOM_ERROR(batch_norm_add_relu(x, zeros({2, 3, 4}, kBFloat16), Tensor(), Tensor(),
                                        Tensor(), Tensor(), true),
                    "batch_norm", "residual", "[2, 3, 4, 4]", "[2, 3, 4]");
  EXPECT_LOOM_ERROR(batch_norm_add_relu(x, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "batch_norm_add_relu", "residual");
}

// A channel whose mean dwarfs its spread (tests/BatchNormFarMean.h) keeps
// its float32 input gradient: the backward applies b * (x - mean), as
// PyTorch's does, not b * x + (... - b * mean), whose two ~1e6 terms cancel
// to the ~1e2 result and kept float32's error of the big ones (1%).  The
// reference is the float64 kernel on the same values.
TEST(BatchNorm, BackwardKeepsChannelsWhoseMeanDwarfsTheirSpread) {
  const testing::FarMeanCase c = testing::far_mean_case();
  for (bool channels_last : {false, true}) {
    const MemoryFormat format = channels_last_if(channels_last);
    const Tensor x = c.input.contiguous(format), go = c.grad_output.contiguous(format);
    const auto [gi, gw, gb] = testing::batch_norm_gradients(x, go, c.weight);
    const auto [gi64, gw64, gb64] = testing::batch_norm_gradients(
        x.to(kFloat64), go.to(kFloat64), c.weight.to(kFloat64));
    ASSERT_EQ(gi.sizes(), gi64.sizes());
    const auto [worst, scale] = testing::worst_error_and_scale(gi, gi64);
    EXPECT_GT(scale, 100.0);  // channel 0's: w * invstd ~ 1.5 / 0.003
    EXPECT_LT(worst, 1e-5 * scale) << (channels_last ? "channels last" : "contiguous")
                                   << ": worst error " << worst << " of " << scale;
    EXPECT_TRUE(AllClose(gw, gw64, 1e-5, 1e-5));
    EXPECT_TRUE(AllClose(gb, gb64, 1e-6, 1e-6));
  }
}

// A long channel of float32 values far from zero (100,000 values in [99, 101)):
// the statistics as the float64 computation's, rounded.  A float32
// accumulator over the whole run had the mean 7 ulps off (5e-5).
TEST(BatchNorm, LongChannelsFarFromZeroKeepTheirStatistics) {
  Generator gen(11);
  const Tensor x = rand({2, 2, 50000}, kFloat32, &gen) * 2 + 99;
  const std::vector<double> v = x.to_vector<double>();
  for (bool channels_last : {false, true}) {
    const Tensor in = channels_last ? x.unsqueeze(-1).contiguous(MemoryFormat::kChannelsLast) : x;
    const auto [out, mean, invstd] = native::batch_norm(in, Tensor(), Tensor(), Tensor(), Tensor(),
                                                        true, 0.1, 1e-5);
    for (int64_t c = 0; c < 2; ++c) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = 0; i < 50000; ++i) sum += v[(n * 2 + c) * 50000 + i];
      const double m = sum / 100000;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = 0; i < 50000; ++i) sq += std::pow(v[(n * 2 + c) * 50000 + i] - m, 2);
      const double is = 1 / std::sqrt(sq / 100000 + 1e-5);
      EXPECT_NEAR(mean.to_vector<double>()[c], m, 7.7e-6)  // an ulp at 100
          << (channels_last ? "channels last" : "contiguous") << ", channel " << c;
      EXPECT_NEAR(invstd.to_vector<double>()[c], is, 1e-6 * is)
          << (channels_last ? "channels last" : "contiguous") << ", channel " << c;
    }
  }
}

TEST(BatchNorm, Errors) {
  const Tensor x = zeros({4, 3, 2, 2});
  EXPECT_LOOM_ERROR(batch_norm(x, zeros({2}), ones({2}), Tensor(), Tensor(), true),
                    "batch_norm", "running_mean", "[3]", "[2]");
  EXPECT_LOOM_ERROR(batch_norm(x, zeros({3}), ones({3}), ones({4}), Tensor(), true),
                    "batch_norm", "weight", "[3]", "[4]");
  EXPECT_LOOM_ERROR(batch_norm(x, zeros({3}), ones({3}), Tensor(), zeros({2, 3}), false),
                    "batch_norm", "bias");
  EXPECT_LOOM_ERROR(batch_norm(zeros({1, 3}), zeros({3}), ones({3}), Tensor(), Tensor(), true),
                    "Expected more than 1 value per channel when training", "[1, 3]");
  EXPECT_LOOM_ERROR(batch_norm(zeros({5}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    "batch_norm", "at least 2 dims");
  EXPECT_LOOM_ERROR(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), "batch_norm",
                    "evaluation mode");
  EXPECT_LOOM_ERROR(batch_norm(x, zeros({3}, kFloat64), ones({3}, kFloat64), Tensor(), Tensor(), true),
                    "batch_norm", "dtype");
}

}  // namespace
}  // namespace loom
