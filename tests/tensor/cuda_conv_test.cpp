// cuDNN convolution (tensor/cuda/Conv.cu via tensor/native/CudaConvolution.cpp)
// against the CPU convolution as the oracle: forward and all three gradients
// through autograd, for stride, padding, dilation, groups (depthwise too),
// rectangular kernels, odd sizes, unbatched inputs, non-contiguous inputs,
// float32 (TF32 off), float64, float16 and bfloat16; both algorithm paths (heuristics and
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
    cuda::set_cudnn_allow_tf32(false);
    cuda::set_cudnn_benchmark(false);
  }
  void TearDown() override {
    cuda::set_cudnn_allow_tf32(tf32_);
    cuda::set_cudnn_benchmark(benchmark_);
  }
  bool tf32_ = true, benchmark_ = false;
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
