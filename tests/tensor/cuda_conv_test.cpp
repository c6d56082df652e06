// cuDNN convolution (tensor/cuda/Conv.cu via tensor/native/CudaConvolution.cpp)
// against the CPU convolution as the oracle: forward and all three gradients
// through autograd, for stride, padding, dilation, groups (depthwise too),
// rectangular kernels, odd sizes, unbatched inputs, non-contiguous inputs,
// float32 (TF32 off), float64, float16 and bfloat16 (NCHW and channels
// last); both algorithm paths (heuristics and
// cudnn_benchmark) and repeat calls through the algorithm cache; the empty
// shapes cuDNN cannot take (answered by loom); errors.  Tagged gpu; every
// case skips itself where no GPU is visible.  The cache key is host-tested in
// conv_algo_cache_test.cpp.
#include <vector>

#include "tensor/CudaFlags.h"
#include "tensor/native/Convolution.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::CloseScaled;
using testing_cuda::GradParity;
using testing_cuda::kGpu;
using testing_cuda::sample;

// TF32 off and benchmark off for every case; restored afterwards.
class CudaConv : public testing_cuda::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    tf32_ = cuda::cudnn_allow_tf32();
    benchmark_ = cuda::cudnn_benchmark();
    channels_last_ = cuda::cudnn_channels_last();
    cuda::set_cudnn_allow_tf32(false);
    cuda::set_cudnn_benchmark(false);
  }
  void TearDown() override {
    cuda::set_cudnn_allow_tf32(tf32_);
    cuda::set_cudnn_benchmark(benchmark_);
    cuda::set_cudnn_channels_last(channels_last_);
  }
  bool tf32_ = true, benchmark_ = false, channels_last_ = true;
};

struct ConvCase {
  IntList input, weight;
  IntList stride, padding, dilation;
  int64_t groups;
  bool bias;
};

const std::vector<ConvCase> kCases = {
    {{2, 3, 8, 8}, {4, 3, 3, 3}, {1}, {1}, {1}, 1, true},
    {{3, 4, 11, 9}, {6, 4, 3, 5}, {2, 1}, {1, 2}, {1}, 1, true},    // odd, rectangular
    {{2, 4, 13, 13}, {4, 2, 3, 3}, {1}, {2}, {2}, 2, false},        // dilation, groups
    {{2, 6, 10, 7}, {6, 1, 3, 3}, {2}, {1}, {1}, 6, true},          // depthwise
    {{1, 3, 7, 7}, {5, 3, 7, 7}, {1}, {0}, {1}, 1, true},           // kernel = image
    {{4, 2, 5, 6}, {3, 2, 1, 1}, {1}, {0}, {1}, 1, true},           // 1x1
    {{2, 6, 9, 8}, {9, 2, 2, 3}, {3, 2}, {1, 0}, {2, 1}, 3, true},  // everything at once
};

::testing::AssertionResult conv_parity(DType d, const ConvCase& c, uint64_t seed) {
  std::vector<Tensor> inputs = {sample(d, c.input, seed), sample(d, c.weight, seed + 1)};
  if (c.bias) inputs.push_back(sample(d, {c.weight[0]}, seed + 2));
  return GradParity(
      [&](const std::vector<Tensor>& in) {
        return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding, c.dilation,
                      c.groups);
      },
      inputs);
}

TEST_F(CudaConv, ForwardAndBackwardEveryParameter) {
  for (DType d : {kFloat32, kFloat64})
    for (size_t i = 0; i < kCases.size(); ++i)
      EXPECT_TRUE(conv_parity(d, kCases[i], 10 * i)) << dtype_name(d) << " case " << i;
}

// float16 and bfloat16 run in cuDNN as they are (tensor cores, float32
// accumulation); the CPU computes them in float32 (or oneDNN's bfloat16
// kernels) and rounds once: the same within the 16-bit type's precision,
// relative to the largest value, forward and every gradient.
TEST_F(CudaConv, HalfAndBfloat16InCudnn) {
  for (DType d : {kFloat16, kBFloat16}) {
    uint64_t seed = 40;
    for (const ConvCase& c : kCases) {
      std::vector<Tensor> inputs = {sample(d, c.input, seed), sample(d, c.weight, seed + 1)};
      if (c.bias) inputs.push_back(sample(d, {c.weight[0]}, seed + 2));
      seed += 3;
      EXPECT_TRUE(GradParity(
          [&](const std::vector<Tensor>& in) {
            const Tensor y = conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding,
                                    c.dilation, c.groups);
            EXPECT_EQ(y.dtype(), in[0].dtype());
            return y;
          },
          inputs, d == kFloat16 ? 4e-3 : 2e-2))
          << dtype_name(d) << " input " << shape_str(c.input) << " weight " << shape_str(c.weight);
    }
  }
}

// float16 and bfloat16 with a channels-last input (or weight) run channels
// last in cuDNN (NHWC activations, OHWI weights) and return channels-last
// outputs and input gradients; the same values as the CPU, every case and
// gradient (the bias added and summed by loom).  With cudnn_channels_last
// off they run NCHW, as float32 does.
TEST_F(CudaConv, ChannelsLastHalfAndBfloat16) {
  constexpr MemoryFormat kLast = MemoryFormat::kChannelsLast;
  for (DType d : {kFloat16, kBFloat16}) {
    uint64_t seed = 70;
    for (const ConvCase& c : kCases) {
      if (c.input.size() != 4) continue;
      std::vector<Tensor> inputs = {sample(d, c.input, seed), sample(d, c.weight, seed + 1)};
      if (c.bias) inputs.push_back(sample(d, {c.weight[0]}, seed + 2));
      seed += 3;
      for (bool weight_last : {false, true}) {
        EXPECT_TRUE(GradParity(
            [&](const std::vector<Tensor>& in) {
              const Tensor x = weight_last ? in[0] : in[0].contiguous(kLast);
              const Tensor w = weight_last ? in[1].contiguous(kLast) : in[1];
              const Tensor y = conv2d(x, w, c.bias ? in[2] : Tensor(), c.stride, c.padding,
                                      c.dilation, c.groups);
              EXPECT_EQ(y.dtype(), in[0].dtype());
              // A weight of one input channel or 1x1 is NCHW too: as in
              // PyTorch, such an ambiguous weight leaves the layout to the input.
              const bool last = x.suggest_memory_format() == kLast ||
                                w.suggest_memory_format() == kLast;
              if (y.is_cuda()) {
                EXPECT_EQ(y.is_contiguous(kLast), last) << y.describe();
              }
              return y;
            },
            inputs, d == kFloat16 ? 4e-3 : 2e-2))
            << dtype_name(d) << " input " << shape_str(c.input) << " weight "
            << shape_str(c.weight) << (weight_last ? " (channels-last weight)" : "");
      }
    }
  }
  // The input's gradient keeps its layout; the weight's stays OIHW.
  const Tensor x = sample(kFloat16, {2, 8, 9, 9}, 1).to(kGpu).contiguous(kLast).requires_grad_();
  const Tensor w = sample(kFloat16, {16, 8, 3, 3}, 2).to(kGpu).requires_grad_();
  conv2d(x, w, Tensor(), {1}, {1}).sum().backward();
  EXPECT_TRUE(x.grad().is_contiguous(kLast));
  EXPECT_TRUE(w.grad().is_contiguous());
  // Switched off: NCHW, the same values.
  const Tensor on = native::conv2d(x.detach(), w.detach(), Tensor(), {1}, {1}, {1}, 1);
  cuda::set_cudnn_channels_last(false);
  const Tensor off = native::conv2d(x.detach(), w.detach(), Tensor(), {1}, {1}, {1}, 1);
  cuda::set_cudnn_channels_last(true);
  EXPECT_TRUE(off.is_contiguous());
  EXPECT_TRUE(CloseScaled(on, off.cpu(), 4e-3));
  // float32 stays NCHW.
  const Tensor x32 = sample(kFloat32, {2, 8, 9, 9}, 3).to(kGpu).contiguous(kLast);
  EXPECT_TRUE(native::conv2d(x32, sample(kFloat32, {16, 8, 3, 3}, 4).to(kGpu), Tensor(), {1}, {1},
                             {1}, 1)
                  .is_contiguous());
}

// nn::Conv2d asks whether its convolutions would run channels last, as
// loom's ResNets do before converting their input once.
TEST_F(CudaConv, PrefersChannelsLastForHalfAndBfloat16) {
  const auto prefers = [](DType d) {
    return native::conv2d_prefers_channels_last(kGpu, d, {8, 64, 56, 56}, {64, 64, 3, 3}, {1},
                                                {1}, {1}, 1);
  };
  EXPECT_TRUE(prefers(kFloat16));
  EXPECT_TRUE(prefers(kBFloat16));
  EXPECT_FALSE(prefers(kFloat32));
  cuda::set_cudnn_channels_last(false);
  EXPECT_FALSE(prefers(kFloat16));
  cuda::set_cudnn_channels_last(true);
}

TEST_F(CudaConv, BenchmarkedAlgorithmsAndRepeatCalls) {
  cuda::set_cudnn_benchmark(true);
  for (size_t i = 0; i < kCases.size(); ++i) {
    EXPECT_TRUE(conv_parity(kFloat32, kCases[i], 100 + i)) << "case " << i;
    EXPECT_TRUE(conv_parity(kFloat32, kCases[i], 200 + i)) << "case " << i << ", cached";
  }
}

TEST_F(CudaConv, UnbatchedAndNonContiguousInputs) {
  for (DType d : {kFloat32, kFloat64}) {
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], {1}, {1}); },
        {sample(d, {3, 6, 5}, 1), sample(d, {2, 3, 3, 3}, 2), sample(d, {2}, 3)}));
    // An NHWC-strided input (permuted view) and a transposed-in-channel weight.
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) {
          return conv2d(in[0].permute({0, 3, 1, 2}), in[1].transpose(0, 1), Tensor(), {1}, {1});
        },
        {sample(d, {2, 7, 6, 3}, 4), sample(d, {3, 4, 3, 3}, 5)}));
  }
}

TEST_F(CudaConv, EmptyShapes) {
  for (DType d : {kFloat32, kFloat64}) {
    // Empty batch: empty output, zero weight/bias gradients.
    EXPECT_TRUE(GradParity(
        [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2]); },
        {sample(d, {0, 3, 5, 5}, 1), sample(d, {4, 3, 3, 3}, 2), sample(d, {4}, 3)}));
    // No output channels.
    const Tensor x = sample(d, {2, 3, 5, 5}, 4), w = sample(d, {0, 3, 3, 3}, 5);
    EXPECT_TRUE(CloseScaled(native::conv2d(x.to(kGpu), w.to(kGpu), Tensor(), {1}, {0}, {1}, 1),
                            native::conv2d(x, w, Tensor(), {1}, {0}, {1}, 1)));
  }
}

TEST_F(CudaConv, Tf32SwitchIsHonoured) {
  const Tensor x = sample(kFloat32, {4, 16, 12, 12}, 1), w = sample(kFloat32, {32, 16, 3, 3}, 2);
  const Tensor expected = native::conv2d(x, w, Tensor(), {1}, {1}, {1}, 1);
  cuda::set_cudnn_allow_tf32(true);
  EXPECT_TRUE(CloseScaled(native::conv2d(x.to(kGpu), w.to(kGpu), Tensor(), {1}, {1}, {1}, 1),
                          expected, 1e-2));
  cuda::set_cudnn_allow_tf32(false);
  EXPECT_TRUE(CloseScaled(native::conv2d(x.to(kGpu), w.to(kGpu), Tensor(), {1}, {1}, {1}, 1),
                          expected, 1e-5));
}

TEST_F(CudaConv, Errors) {
  const Tensor x = sample(kFloat32, {2, 3, 5, 5}, 1).to(kGpu);
  EXPECT_LOOM_ERROR(native::conv2d(x, sample(kFloat32, {4, 2, 3, 3}, 2).to(kGpu), Tensor(), {1},
                                   {0}, {1}, 1),
                    "conv2d", "channels");
  EXPECT_LOOM_ERROR(
      native::conv2d(x, sample(kFloat32, {4, 3, 3, 3}, 2), Tensor(), {1}, {0}, {1}, 1), "cuda:0",
      "cpu");
  EXPECT_LOOM_ERROR(native::conv2d(x, sample(kFloat32, {4, 3, 7, 7}, 2).to(kGpu), Tensor(), {1},
                                   {0}, {1}, 1),
                    "Kernel size");
}

}  // namespace
}  // namespace loom
