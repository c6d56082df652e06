// Batch norm on channels-last (NHWC) CUDA tensors
// (tensor/cuda/BatchNormChannelsLast.cu) against the CPU's channels-last
// kernels as the oracle: training forward (output, save_mean, save_invstd,
// running statistics) and eval, the fused ReLU and residual add, the
// backward (every gradient, with and without the fused ReLU's mask, each
// subset of them), float32 and float64 within tight tolerances, float16 and
// bfloat16 as the GPU's own float32 result rounded once and within 16-bit
// rounding of the CPU's float32 one; channel counts that do and do not take
// the vectorised path (1, 3, 37, 64, 2048), one row per image (H = W = 1) and
// one channel (both run through the kernel slots directly: the native op
// takes such inputs as NCHW, the same memory), a large M cut into many
// splits, a channel whose mean dwarfs its spread; and through autograd,
// nn::BatchNorm2d and batch_norm on channels-last tensors give the values
// and gradients they give on NCHW ones.  Every output comes back channels
// last.  Tagged gpu; every case skips itself where no GPU is visible.
#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "nn/modules/BatchNorm.h"
#include "tensor/native/Normalization.h"
#include "tests/BatchNormFarMean.h"
#include "tests/CudaBatchNormFusion.h"
#include "tests/CudaGradParity.h"
#include "tests/HalfRounding.h"

namespace loom {
namespace {

using testing_cuda::CloseScaled;
using testing_cuda::kGpu;
using testing_cuda::sample;

class CudaBatchNormChannelsLast : public testing_cuda::CudaTest {};

const Device kCpu(kCPU);

Tensor nhwc(const Tensor& t) { return t.contiguous(MemoryFormat::kChannelsLast); }

// t is laid out channels last and not as NCHW: the layout the kernels keep.
::testing::AssertionResult IsChannelsLast(const Tensor& t) {
  if (t.is_contiguous(MemoryFormat::kChannelsLast) && !t.is_contiguous())
    return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << t.describe() << " has strides [";
  for (size_t i = 0; i < t.strides().size(); ++i) r << (i ? ", " : "") << t.strides()[i];
  return r << "], not channels last";
}

// The shapes of the parity cases: C = 3 and 37 take one channel per thread
// (37: two tiles of a warp's width), 64 four (16 threads a row), 2048 four in
// 16 tiles; H = 1 and W = 1 separately.
const std::vector<IntList> kShapes = {{4, 3, 5, 6},  {2, 37, 3, 5}, {3, 64, 4, 4},
                                      {2, 2048, 2, 3}, {5, 8, 1, 3},  {6, 12, 2, 1}};

// What one native::batch_norm and its backward give on a device.
struct Results {
  Tensor out, mean, invstd, running_mean, running_var;
  Tensor grad_input, grad_weight, grad_bias;
};

// The inputs of a parity case, on the CPU: x, the residual and grad_output
// channels last, the parameters and running statistics of the statistics
// dtype (weight/bias undefined without affine).
struct Inputs {
  Tensor x, residual, grad_output, weight, bias, running_mean, running_var;
};

Inputs make_inputs(DType dtype, const IntList& shape, bool affine, uint64_t seed) {
  const DType stats = native::batch_norm_stats_dtype(dtype);
  const int64_t C = shape[1];
  Inputs in;
  in.x = nhwc(sample(kFloat32, shape, seed, -3, 5).to(dtype));
  in.residual = nhwc(sample(kFloat32, shape, seed + 1).to(dtype));
  in.grad_output = nhwc(sample(kFloat32, shape, seed + 2).to(dtype));
  if (affine) {
    in.weight = sample(stats, {C}, seed + 3, 0.5, 1.5);
    in.bias = sample(stats, {C}, seed + 4);
  }
  in.running_mean = sample(stats, {C}, seed + 5);
  in.running_var = sample(stats, {C}, seed + 6, 0.5, 2.0);
  return in;
}

Tensor on(const Tensor& t, Device device) { return t.defined() ? t.to(device) : t; }

// A fresh channels-last leaf holding t's values (clone() would give NCHW).
Tensor nhwc_leaf(const Tensor& t) { return nhwc(t.detach().clone()).detach().requires_grad_(); }

// Sets element i (in memory order) of a float32 or float64 CPU tensor to NaN.
void set_nan(const Tensor& t, int64_t i) {
  if (t.dtype() == kFloat32) static_cast<float*>(t.data_ptr())[i] = std::nanf("");
  if (t.dtype() == kFloat64) static_cast<double*>(t.data_ptr())[i] = std::nan("");
}

// native::batch_norm (with the ReLU and the residual when asked) on
// `device`, then native::batch_norm_backward of in.grad_output for every
// gradient (through the fused ReLU's mask when relu).
Results run_on(Device device, const Inputs& in, bool training, bool relu, bool residual) {
  Results r;
  const Tensor x = on(in.x, device), w = on(in.weight, device), b = on(in.bias, device);
  r.running_mean = in.running_mean.to(device).clone();
  r.running_var = in.running_var.to(device).clone();
  std::tie(r.out, r.mean, r.invstd) =
      native::batch_norm(x, r.running_mean, r.running_var, w, b, training, 0.1, 1e-5, relu,
                         residual ? on(in.residual, device) : Tensor());
  native::batch_norm_backward(on(in.grad_output, device), x, w, r.mean, r.invstd, training,
                              true, true, true, r.grad_input, r.grad_weight, r.grad_bias,
                              relu ? r.out : Tensor());
  return r;
}

// Every result of the GPU's run within CloseScaled (rtol < 0: the dtype's
// default) of the CPU's, the activations channels last.
void expect_runs_match(const Results& gpu, const Results& cpu, double rtol = -1) {
  ASSERT_EQ(gpu.out.sizes(), cpu.out.sizes());
  EXPECT_TRUE(IsChannelsLast(gpu.out));
  EXPECT_TRUE(CloseScaled(gpu.out, cpu.out, rtol)) << "out";
  EXPECT_TRUE(CloseScaled(gpu.mean, cpu.mean, rtol)) << "save_mean";
  EXPECT_TRUE(CloseScaled(gpu.invstd, cpu.invstd, rtol)) << "save_invstd";
  EXPECT_TRUE(CloseScaled(gpu.running_mean, cpu.running_mean, rtol)) << "running_mean";
  EXPECT_TRUE(CloseScaled(gpu.running_var, cpu.running_var, rtol)) << "running_var";
  EXPECT_EQ(gpu.grad_input.defined(), cpu.grad_input.defined());
  if (gpu.grad_input.defined()) {
    ASSERT_EQ(gpu.grad_input.sizes(), cpu.grad_input.sizes());
    EXPECT_TRUE(IsChannelsLast(gpu.grad_input));
    EXPECT_TRUE(CloseScaled(gpu.grad_input, cpu.grad_input, rtol)) << "grad_input";
  }
  EXPECT_TRUE(CloseScaled(gpu.grad_weight, cpu.grad_weight, rtol)) << "grad_weight";
  EXPECT_TRUE(CloseScaled(gpu.grad_bias, cpu.grad_bias, rtol)) << "grad_bias";
}

// ---- the kernels through native::batch_norm ---------------------------------------------

TEST_F(CudaBatchNormChannelsLast, TheGpuTakesChannelsLastInputsOfEveryDtype) {
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
    EXPECT_TRUE(native::batch_norm_channels_last_stub.answer_or(false, kGpu, d)) << dtype_name(d);
}

// Training and eval, with and without weight and bias, plain, with the
// fused ReLU and with the fused residual add and ReLU: every output and
// gradient as the CPU's.
TEST_F(CudaBatchNormChannelsLast, ForwardAndBackwardMatchTheCpu) {
  for (DType d : {kFloat32, kFloat64})
    for (const IntList& shape : kShapes)
      for (bool training : {true, false})
        for (bool affine : {true, false})
          for (int fused = 0; fused < 3; ++fused) {
            const bool relu = fused > 0, residual = fused > 1;
            SCOPED_TRACE(std::string(dtype_name(d)) + " " + shape_str(shape) +
                         (training ? " train" : " eval") + (affine ? " affine" : "") +
                         (relu ? " relu" : "") + (residual ? " residual" : ""));
            const Inputs in = make_inputs(d, shape, affine, 10);
            expect_runs_match(run_on(kGpu, in, training, relu, residual),
                              run_on(kCpu, in, training, relu, residual));
          }
}

// Each subset of the backward's outputs, with and without the ReLU's mask
// (a NaN output among the masked ones), training and eval.
TEST_F(CudaBatchNormChannelsLast, BackwardComputesTheGradientsAsked) {
  const std::vector<std::array<bool, 3>> subsets = {
      {true, false, false}, {false, true, false}, {false, false, true},
      {true, true, false},  {false, true, true},  {true, false, true}};
  for (DType d : {kFloat32, kFloat64})
    for (const IntList& shape : {IntList{3, 64, 4, 4}, IntList{4, 3, 5, 6}})
      for (bool training : {true, false})
        for (bool masked : {false, true})
          for (const auto& needs : subsets) {
            SCOPED_TRACE(std::string(dtype_name(d)) + " " + shape_str(shape) +
                         (training ? " train" : " eval") + (masked ? " masked" : "") +
                         " needs " + std::to_string(needs[0]) + std::to_string(needs[1]) +
                         std::to_string(needs[2]));
            const Inputs in = make_inputs(d, shape, true, 20);
            const auto [out, mean, invstd] =
                native::batch_norm(in.x, in.running_mean, in.running_var, in.weight, in.bias,
                                   training, 0.1, 1e-5, masked);
            Tensor y;
            if (masked) {
              y = nhwc(out.clone());
              set_nan(y, 1);
            }
            Tensor g[3], c[3];
            native::batch_norm_backward(in.grad_output.to(kGpu), in.x.to(kGpu),
                                        in.weight.to(kGpu), mean.to(kGpu), invstd.to(kGpu),
                                        training, needs[0], needs[1], needs[2], g[0], g[1], g[2],
                                        on(y, kGpu));
            native::batch_norm_backward(in.grad_output, in.x, in.weight, mean, invstd, training,
                                        needs[0], needs[1], needs[2], c[0], c[1], c[2], y);
            for (int i = 0; i < 3; ++i) {
              EXPECT_EQ(g[i].defined(), needs[i]) << "gradient " << i;
              EXPECT_EQ(c[i].defined(), needs[i]) << "gradient " << i;
              if (!needs[i]) continue;
              ASSERT_EQ(g[i].sizes(), c[i].sizes()) << "gradient " << i;
              EXPECT_TRUE(CloseScaled(g[i], c[i])) << "gradient " << i;
            }
            if (needs[0]) {
              EXPECT_TRUE(IsChannelsLast(g[0]));
            }
          }
}

// float16 and bfloat16 activations (float32 parameters and statistics):
// every result is the GPU's float32 channels-last result rounded once (one
// ulp allowed where the compiler fuses differently), with the same float32
// statistics, as the NCHW kernels' (cuda_half_test); and within one 16-bit
// rounding of the CPU's float32 result.  With the fused ReLU and without
// (it commutes with the rounding); the fused residual add rounds batch
// norm's value to 16 bits first, as the separate `+` would see it, so it is
// held to the separate ops instead (FusedReluAndResidualAreTheSeparateOps).
TEST_F(CudaBatchNormChannelsLast, SixteenBitActivationsRoundTheFloat32Result) {
  using testing::WithinOneUlpOfRounded;
  for (DType d : testing::kHalfDTypes)
    for (const IntList& shape : {IntList{3, 64, 4, 4}, IntList{4, 3, 5, 6}, IntList{2, 37, 3, 5}})
      for (bool training : {true, false})
        for (bool relu : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(d)) + " " + shape_str(shape) +
                       (training ? " train" : " eval") + (relu ? " relu" : ""));
          const Inputs in = make_inputs(d, shape, true, 30);
          Inputs wide = in;  // the same values in float32
          wide.x = nhwc(in.x.to(kFloat32));
          wide.residual = nhwc(in.residual.to(kFloat32));
          wide.grad_output = nhwc(in.grad_output.to(kFloat32));
          const Results half = run_on(kGpu, in, training, relu, false);
          const Results gpu32 = run_on(kGpu, wide, training, relu, false);
          const Results cpu32 = run_on(kCpu, wide, training, relu, false);
          ASSERT_EQ(half.out.sizes(), gpu32.out.sizes());
          EXPECT_EQ(half.out.dtype(), d);
          EXPECT_TRUE(IsChannelsLast(half.out));
          EXPECT_TRUE(IsChannelsLast(half.grad_input));
          EXPECT_TRUE(WithinOneUlpOfRounded(half.out, gpu32.out.cpu()));
          EXPECT_TRUE(testing::AllClose(half.mean.cpu(), gpu32.mean.cpu(), 1e-6, 1e-7));
          EXPECT_TRUE(testing::AllClose(half.invstd.cpu(), gpu32.invstd.cpu(), 1e-6, 1e-7));
          EXPECT_TRUE(testing::AllClose(half.running_mean.cpu(), gpu32.running_mean.cpu(), 1e-6,
                                        1e-7));
          EXPECT_TRUE(testing::AllClose(half.running_var.cpu(), gpu32.running_var.cpu(), 1e-6,
                                        1e-7));
          EXPECT_EQ(half.grad_input.dtype(), d);
          EXPECT_TRUE(WithinOneUlpOfRounded(half.grad_input, gpu32.grad_input.cpu()));
          EXPECT_TRUE(testing::AllClose(half.grad_weight.cpu(), gpu32.grad_weight.cpu(), 1e-5,
                                        1e-6));
          EXPECT_TRUE(testing::AllClose(half.grad_bias.cpu(), gpu32.grad_bias.cpu(), 1e-5, 1e-6));
          // Against the CPU: one rounding to 16 bits of the largest value.
          const double rounding = d == kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
          expect_runs_match(gpu32, cpu32);
          EXPECT_TRUE(CloseScaled(half.out.to(kFloat32), cpu32.out, rounding)) << "out";
          EXPECT_TRUE(CloseScaled(half.grad_input.to(kFloat32), cpu32.grad_input, rounding))
              << "grad_input";
          EXPECT_TRUE(CloseScaled(half.mean, cpu32.mean)) << "save_mean";
          EXPECT_TRUE(CloseScaled(half.invstd, cpu32.invstd)) << "save_invstd";
          EXPECT_TRUE(CloseScaled(half.grad_weight, cpu32.grad_weight)) << "grad_weight";
          EXPECT_TRUE(CloseScaled(half.grad_bias, cpu32.grad_bias)) << "grad_bias";
        }
}

// The fused ReLU and residual add give the bits of batch norm, `+` and ReLU
// run as separate ops on the channels-last GPU tensors, running statistics
// and every gradient included (the residual's too), for every dtype, on a
// small input and one cut into several splits.
TEST_F(CudaBatchNormChannelsLast, FusedReluAndResidualAreTheSeparateOps) {
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
    for (const IntList& shape : {IntList{3, 4, 5, 6}, IntList{4, 8, 32, 32}})
      for (bool training : {true, false})
        for (bool add : {false, true})
          EXPECT_TRUE(testing_cuda::FusedBatchNormIsTheSeparateOps(d, shape, training, add,
                                                                   MemoryFormat::kChannelsLast))
              << dtype_name(d) << " " << shape_str(shape) << (training ? " train" : " eval")
              << (add ? " add+relu" : " relu");
  // The fused output keeps the layout.
  const Tensor x = nhwc(sample(kFloat32, {3, 4, 5, 6}, 46).to(kGpu));
  EXPECT_TRUE(IsChannelsLast(batch_norm_relu(x, Tensor(), Tensor(), Tensor(), Tensor(), true,
                                             0.1, 1e-5)));
}

// Channels-last tensors one element past an aligned address (views into a
// longer buffer): C = 64 would take four channels per thread, but the
// loads are not aligned to them, so the kernels take one at a time; the
// results are the CPU's all the same.
TEST_F(CudaBatchNormChannelsLast, UnalignedTensorsTakeOneChannelAtATime) {
  const IntList shape = {3, 64, 4, 5};
  const int64_t numel = 3 * 64 * 4 * 5;
  // (N, C, H, W) channels last at storage offset 1 of `flat`.
  auto unaligned = [&](const Tensor& flat) {
    return flat.narrow(0, 1, numel).view({3, 4, 5, 64}).permute({0, 3, 1, 2});
  };
  for (DType d : {kFloat32, kFloat64, kBFloat16})
    for (bool training : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + (training ? " train" : " eval"));
      const Inputs base = make_inputs(d, shape, true, 100);
      Results runs[2];
      for (int g = 0; g < 2; ++g) {
        const Device dev = g ? kGpu : kCpu;
        Inputs in = base;
        in.x = unaligned(sample(kFloat32, {numel + 1}, 101, -3, 5).to(d).to(dev));
        in.residual = unaligned(sample(kFloat32, {numel + 1}, 102).to(d).to(dev));
        in.grad_output = unaligned(sample(kFloat32, {numel + 1}, 103).to(d).to(dev));
        ASSERT_TRUE(IsChannelsLast(in.x));
        ASSERT_EQ(in.x.storage_offset(), 1);
        runs[g] = run_on(dev, in, training, true, true);
      }
      expect_runs_match(runs[1], runs[0], d == kBFloat16 ? std::ldexp(1.0, -7) : -1);
    }
}

// Many rows (16 x 64 x 64 = 65,536 of 4 channels, 32 splits on an H100's 132
// SMs), values far from zero: statistics, running statistics and gradients
// as the CPU's.
TEST_F(CudaBatchNormChannelsLast, LargeBatchesAreCutIntoSplits) {
  const IntList shape = {16, 4, 64, 64};
  Inputs in = make_inputs(kFloat32, shape, true, 50);
  in.x = nhwc(sample(kFloat32, shape, 51, 99, 101));
  expect_runs_match(run_on(kGpu, in, true, true, false), run_on(kCpu, in, true, true, false));
}

// A channel whose mean dwarfs its spread (tests/BatchNormFarMean.h): the
// GPU's float32 channels-last input gradient stays within 1e-5 of the CPU's
// float64 one, as the NCHW kernels' does.
TEST_F(CudaBatchNormChannelsLast, BackwardKeepsChannelsWhoseMeanDwarfsTheirSpread) {
  const testing::FarMeanCase c = testing::far_mean_case();
  const Tensor x = nhwc(c.input), go = nhwc(c.grad_output);
  const auto [gi, gw, gb] =
      testing::batch_norm_gradients(x.to(kGpu), go.to(kGpu), c.weight.to(kGpu));
  const auto [gi64, gw64, gb64] =
      testing::batch_norm_gradients(x.to(kFloat64), go.to(kFloat64), c.weight.to(kFloat64));
  ASSERT_EQ(gi.sizes(), gi64.sizes());
  EXPECT_TRUE(IsChannelsLast(gi));
  const auto [worst, scale] = testing::worst_error_and_scale(gi.cpu(), gi64);
  EXPECT_GT(scale, 100.0);
  EXPECT_LT(worst, 1e-5 * scale) << "worst error " << worst << " of " << scale;
  EXPECT_TRUE(testing::AllClose(gw.cpu(), gw64, 1e-5, 1e-5));
  EXPECT_TRUE(testing::AllClose(gb.cpu(), gb64, 1e-6, 1e-6));
}

// ---- the kernels through their slots ----------------------------------------------------

// One channel, or one pixel per image (H = W = 1), is the same memory in
// both layouts, so native::batch_norm runs such inputs as NCHW; the
// channels-last kernels must still handle them (another caller may set
// channels_last), and here run through the slots with the shape saying so,
// against the CPU's channels-last kernels on the same shape.  The last case
// is a large M: 262,144 rows of one channel.
TEST_F(CudaBatchNormChannelsLast, KernelsTakeOneChannelAndOnePixelPerImage) {
  for (DType d : {kFloat32, kFloat64})
    for (const IntList& shape :
         {IntList{6, 1, 4, 5}, IntList{9, 5, 1, 1}, IntList{7, 8, 1, 1}, IntList{64, 1, 64, 64}}) {
      if (d == kFloat64 && shape[0] == 64) continue;  // the float32 run covers its grid
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + shape_str(shape));
      native::BatchNormShape s{shape[0], shape[1], shape[2] * shape[3]};
      s.channels_last = true;
      s.relu = true;
      s.residual = true;
      const Inputs in = make_inputs(d, shape, true, 60);
      Results runs[2];
      for (int g = 0; g < 2; ++g) {
        const Device dev = g ? kGpu : kCpu;
        const TensorOptions opts = TensorOptions(d).device(dev);
        const TensorOptions stats = TensorOptions(in.weight.dtype()).device(dev);
        const Tensor x = in.x.to(dev), w = in.weight.to(dev), b = in.bias.to(dev);
        Results& r = runs[g];
        r.running_mean = in.running_mean.to(dev).clone();
        r.running_var = in.running_var.to(dev).clone();
        r.out = empty(shape, opts, MemoryFormat::kChannelsLast);
        r.mean = empty({shape[1]}, stats);
        r.invstd = empty({shape[1]}, stats);
        native::batch_norm_stub(dev, s, x, in.residual.to(dev), w, b, r.running_mean,
                                r.running_var, true, 0.1, 1e-5, r.out, r.mean, r.invstd);
        r.grad_input = empty(shape, opts, MemoryFormat::kChannelsLast);
        r.grad_weight = empty({shape[1]}, stats);
        r.grad_bias = empty({shape[1]}, stats);
        native::batch_norm_backward_stub(dev, s, in.grad_output.to(dev), r.out, x, w, r.mean,
                                         r.invstd, true, r.grad_input, r.grad_weight,
                                         r.grad_bias);
      }
      ASSERT_EQ(runs[1].out.sizes(), runs[0].out.sizes());
      EXPECT_TRUE(CloseScaled(runs[1].out, runs[0].out)) << "out";
      EXPECT_TRUE(CloseScaled(runs[1].mean, runs[0].mean)) << "save_mean";
      EXPECT_TRUE(CloseScaled(runs[1].invstd, runs[0].invstd)) << "save_invstd";
      EXPECT_TRUE(CloseScaled(runs[1].running_mean, runs[0].running_mean)) << "running_mean";
      EXPECT_TRUE(CloseScaled(runs[1].running_var, runs[0].running_var)) << "running_var";
      EXPECT_TRUE(CloseScaled(runs[1].grad_input, runs[0].grad_input)) << "grad_input";
      EXPECT_TRUE(CloseScaled(runs[1].grad_weight, runs[0].grad_weight)) << "grad_weight";
      EXPECT_TRUE(CloseScaled(runs[1].grad_bias, runs[0].grad_bias)) << "grad_bias";
    }
}

// The slots check the fused operands' layout: a channels-last shape takes a
// channels-last residual and ReLU output, not NCHW ones.
TEST_F(CudaBatchNormChannelsLast, FusedOperandsMustBeChannelsLast) {
  const IntList shape = {2, 4, 3, 5};
  native::BatchNormShape s{2, 4, 15};
  s.channels_last = true;
  s.residual = true;
  const TensorOptions opts = TensorOptions(kFloat32).device(kGpu);
  const Tensor x = nhwc(sample(kFloat32, shape, 70)).to(kGpu);
  const Tensor out = empty(shape, opts, MemoryFormat::kChannelsLast);
  const Tensor mean = empty({4}, opts), invstd = empty({4}, opts);
  EXPECT_LOOM_ERROR(native::batch_norm_stub(kGpu, s, x, sample(kFloat32, shape, 71).to(kGpu),
                                            Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1,
                                            1e-5, out, mean, invstd),
                    "residual", "channels-last");
  native::batch_norm_stub(kGpu, s, x, nhwc(sample(kFloat32, shape, 71)).to(kGpu), Tensor(),
                          Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5, out, mean, invstd);
  s.residual = false;
  s.relu = true;
  const Tensor gi = empty(shape, opts, MemoryFormat::kChannelsLast);
  EXPECT_LOOM_ERROR(native::batch_norm_backward_stub(kGpu, s, out, out.contiguous(), x,
                                                     Tensor(), mean, invstd, true, gi, Tensor(),
                                                     Tensor()),
                    "ReLU", "channels-last");
}

// ---- through autograd ----------------------------------------------------------------

// nn::BatchNorm2d (forward, forward_relu, forward_add_relu; training then
// eval) on a channels-last CUDA input gives the output, running statistics
// and gradients (input, residual, weight, bias) it gives on the NCHW input,
// the output and the input's gradient channels last.
TEST_F(CudaBatchNormChannelsLast, BatchNorm2dGivesTheValuesAndGradientsOfNchw) {
  for (DType d : {kFloat32, kFloat64, kFloat16})
    for (int mode = 0; mode < 3; ++mode) {
      SCOPED_TRACE(std::string(dtype_name(d)) + (mode == 0   ? " forward"
                                                 : mode == 1 ? " forward_relu"
                                                             : " forward_add_relu"));
      const IntList shape = {4, 16, 6, 5};
      const Tensor x0 = sample(kFloat32, shape, 80, -2, 3).to(d).to(kGpu);
      const Tensor r0 = sample(kFloat32, shape, 81).to(d).to(kGpu);
      const Tensor go = sample(kFloat32, shape, 82).to(d).to(kGpu);
      Tensor outs[2], evals[2], arrived;
      std::vector<Tensor> grads[2], stats[2];
      for (int cl = 0; cl < 2; ++cl) {
        nn::BatchNorm2d m(16);
        m->weight.detach().copy_(sample(kFloat32, {16}, 83, 0.5, 1.5));
        m->bias.detach().copy_(sample(kFloat32, {16}, 84));
        m->to(kGpu);
        if (d == kFloat64) m->to(kFloat64);  // 16-bit inputs keep float32 parameters
        const Tensor x = cl ? nhwc_leaf(x0) : x0.detach().clone().requires_grad_();
        const Tensor r = cl ? nhwc_leaf(r0) : r0.detach().clone().requires_grad_();
        // The input's gradient as batch norm's backward gives it (.grad is
        // an NCHW copy of a channels-last one: AccumulateGrad's clone).
        if (cl) x.register_hook([&arrived](const Tensor& g) {
          arrived = g;
          return Tensor();
        });
        outs[cl] = mode == 0   ? m->forward(x)
                   : mode == 1 ? m->forward_relu(x)
                               : m->forward_add_relu(x, r);
        outs[cl].backward(cl ? nhwc(go) : go);
        grads[cl] = {x.grad(), m->weight.grad(), m->bias.grad()};
        if (mode == 2) grads[cl].push_back(r.grad());
        stats[cl] = {m->running_mean, m->running_var};
        m->eval();
        NoGradGuard no_grad;
        evals[cl] = mode == 0   ? m->forward(x)
                    : mode == 1 ? m->forward_relu(x)
                                : m->forward_add_relu(x, r);
      }
      // NCHW and NHWC sum in other orders: float64 to 1e-11, float32 to
      // 1e-5, float16 to a rounding of its largest value.
      const double rtol = d == kFloat16 ? std::ldexp(1.0, -10) : -1;
      EXPECT_TRUE(IsChannelsLast(outs[1])) << "training output";
      EXPECT_TRUE(IsChannelsLast(evals[1])) << "eval output";
      EXPECT_TRUE(IsChannelsLast(arrived)) << "input gradient";
      ASSERT_EQ(outs[1].sizes(), outs[0].sizes());
      EXPECT_TRUE(CloseScaled(outs[1], outs[0].cpu(), rtol)) << "training output";
      EXPECT_TRUE(CloseScaled(evals[1], evals[0].cpu(), rtol)) << "eval output";
      for (size_t i = 0; i < grads[0].size(); ++i) {
        ASSERT_EQ(grads[1][i].sizes(), grads[0][i].sizes()) << "gradient " << i;
        EXPECT_TRUE(CloseScaled(grads[1][i], grads[0][i].cpu(),
                                i == 0 || i == 3 ? rtol : -1))
            << "gradient " << i;
      }
      for (int i = 0; i < 2; ++i)
        EXPECT_TRUE(CloseScaled(stats[1][i], stats[0][i].cpu())) << "running statistic " << i;
    }
}

// The functional batch_norm, training without running statistics: the same
// values and gradients (input, weight, bias) on both layouts.
TEST_F(CudaBatchNormChannelsLast, FunctionalBatchNormGivesTheValuesAndGradientsOfNchw) {
  for (DType d : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(d));
    const IntList shape = {3, 40, 5, 7};
    const Tensor x0 = sample(d, shape, 90, -1, 4).to(kGpu), go = sample(d, shape, 91).to(kGpu);
    Tensor outs[2];
    std::vector<Tensor> grads[2];
    for (int cl = 0; cl < 2; ++cl) {
      const Tensor x = cl ? nhwc_leaf(x0) : x0.detach().clone().requires_grad_();
      const Tensor w = sample(d, {40}, 92).to(kGpu).requires_grad_();
      const Tensor b = sample(d, {40}, 93).to(kGpu).requires_grad_();
      outs[cl] = batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
      outs[cl].backward(go);
      grads[cl] = {x.grad(), w.grad(), b.grad()};
    }
    ASSERT_EQ(outs[1].sizes(), outs[0].sizes());
    EXPECT_TRUE(IsChannelsLast(outs[1]));
    EXPECT_TRUE(CloseScaled(outs[1], outs[0].cpu()));
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(grads[1][i].sizes(), grads[0][i].sizes()) << "gradient " << i;
      EXPECT_TRUE(CloseScaled(grads[1][i], grads[0][i].cpu())) << "gradient " << i;
    }
  }
}

}  // namespace
}  // namespace loom
