// Max pooling on CUDA (tensor/cuda/Pooling.cu) against the CPU kernels as
// the oracle, bit for bit: float32 and float64 against the CPU's result of the
// same dtype; float16 and bfloat16, which the GPU takes as they are, against
// the CPU's float32 result of the same 16-bit values (a maximum is one of its
// inputs, and the backward's sums run in float32 in the CPU's order, so
// rounding that result once must give the GPU's bits).  Values, indices and
// input gradients, NCHW and channels-last, for overlapping windows (3x3
// stride 2 pad 1 as in the ResNet stem, 3x3 stride 1), padding, dilation,
// ceil_mode, ties (the first maximum wins), NaN (the last NaN wins), channel
// counts that do and do not fill the kernels' 16-byte channel groups (1, 3,
// 37, 8, 64), unbatched inputs and a misaligned channels-last input;
// channels-last results come back channels-last; and through autograd,
// gradients of the input's dtype.  Every comparison checks shapes and
// dtypes before values.  Tagged gpu; every case skips itself where no GPU is
// visible.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/native/Pooling.h"
#include "tests/CudaTestUtil.h"
#include "tests/HalfRounding.h"

namespace loom {
namespace {

using testing_cuda::kGpu;

class CudaMaxPool : public testing_cuda::CudaTest {};

constexpr MemoryFormat kCL = MemoryFormat::kChannelsLast;
const DType kDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// The dtype the CPU reference computes dtype in.
DType reference_dtype(DType dtype) { return is_reduced_float(dtype) ? kFloat32 : dtype; }

// got (a GPU result) has want's shape, dtype and values exactly: the same
// value and sign for every element, any NaN equal to any NaN.
::testing::AssertionResult Exactly(const Tensor& got, const Tensor& want) {
  if (!got.is_cuda()) return ::testing::AssertionFailure() << "not on CUDA: " << got.describe();
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.sizes()) << " vs "
                                         << shape_str(want.sizes());
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << " vs " << want.dtype();
  const DType wide = got.dtype() == kInt64 ? kInt64 : kFloat64;
  if (wide == kInt64) {
    const auto a = got.cpu().to_vector<int64_t>(), b = want.cpu().to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    return ::testing::AssertionSuccess();
  }
  const auto a = got.cpu().to(kFloat64).to_vector<double>();
  const auto b = want.cpu().to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i])) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

struct Window {
  IntList kernel, stride, padding, dilation;
  bool ceil;
  const char* name;
};

const Window kWindows[] = {
    {{3}, {2}, {1}, {1}, false, "3x3 stride 2 pad 1 (the ResNet stem)"},
    {{3}, {1}, {1}, {1}, false, "3x3 stride 1 pad 1"},
    {{3}, {1}, {0}, {1}, false, "3x3 stride 1"},
    {{2}, {}, {0}, {1}, false, "2x2"},
    {{3, 2}, {2, 1}, {1, 1}, {2, 1}, true, "3x2 stride (2, 1) pad 1 dilation (2, 1) ceil_mode"},
    {{4}, {3}, {2}, {1}, true, "4x4 stride 3 pad 2 ceil_mode"},
    {{2, 3}, {1, 2}, {0, 1}, {3, 2}, false, "2x3 stride (1, 2) pad (0, 1) dilation (3, 2)"},
};

// What the GPU gave for one input: values, indices, and the input gradient
// for grad_output go.
struct Pooled {
  Tensor out, indices, grad_input;
};

Pooled pool(const Tensor& x, const Tensor& go, const Window& w) {
  auto [out, indices] =
      native::max_pool2d_with_indices(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil);
  const Tensor gi = native::max_pool2d_backward(go, x.sizes(), w.kernel, w.stride, w.padding,
                                                w.dilation, w.ceil, indices);
  return {out, indices, gi};
}

// x (CPU, of dtype) pooled on the GPU in `format` against the CPU's NCHW
// pooling of x (16-bit: of x in float32, rounded), with a random
// grad_output: values, indices and the input gradient exactly, and the
// layout of each GPU result.
void expect_matches_cpu(const Tensor& x, const Window& w, MemoryFormat format, uint64_t seed) {
  const DType d = x.dtype(), ref = reference_dtype(d);
  const Tensor xr = x.to(ref);
  auto [want_out, want_ix] =
      native::max_pool2d_with_indices(xr, w.kernel, w.stride, w.padding, w.dilation, w.ceil);
  const Tensor go = testing::half_sample(d, want_out.sizes(), seed);
  const Tensor want_gi = native::max_pool2d_backward(go.to(ref), x.sizes(), w.kernel, w.stride,
                                                     w.padding, w.dilation, w.ceil, want_ix);
  const Tensor xg = x.to(kGpu).contiguous(format), gog = go.to(kGpu).contiguous(format);
  const Pooled got = pool(xg, gog, w);
  EXPECT_TRUE(Exactly(got.out, want_out.to(d))) << "values";
  EXPECT_TRUE(Exactly(got.indices, want_ix)) << "indices";
  EXPECT_TRUE(Exactly(got.grad_input, want_gi.to(d))) << "input gradient";
  if (x.dim() == 4) {
    EXPECT_TRUE(got.out.is_contiguous(format)) << "values not in the input's layout";
    EXPECT_TRUE(got.indices.is_contiguous(format)) << "indices not in the input's layout";
    EXPECT_TRUE(got.grad_input.is_contiguous(format)) << "gradient not in the input's layout";
  }
}

std::string layout_name(MemoryFormat f) { return f == kCL ? "channels-last" : "NCHW"; }

TEST_F(CudaMaxPool, EveryDtypeLayoutAndWindowMatchesTheCpu) {
  // Channel counts that fill the 16-byte groups of every dtype (8, 64), and
  // ones that fill none (1, 3, 37).
  for (DType d : kDTypes)
    for (int64_t channels : {1, 3, 8, 37, 64})
      for (MemoryFormat format : {MemoryFormat::kContiguous, kCL})
        for (const Window& w : kWindows) {
          SCOPED_TRACE(std::string(dtype_name(d)) + " C=" + std::to_string(channels) + " " +
                       layout_name(format) + ", " + w.name);
          const Tensor x = testing::half_sample(d, {2, channels, 9, 11}, 1 + channels);
          expect_matches_cpu(x, w, format, 2 + channels);
        }
}

TEST_F(CudaMaxPool, UnbatchedInput) {
  for (DType d : kDTypes)
    for (const Window& w : kWindows) {
      SCOPED_TRACE(std::string(dtype_name(d)) + ", " + w.name);
      expect_matches_cpu(testing::half_sample(d, {5, 8, 7}, 3), w, MemoryFormat::kContiguous, 4);
    }
}

// Small integers: most windows hold several equal maxima (the first in
// window order wins), and NaNs among them (one NaN wins over any number, the
// last of several NaNs wins), including windows of NaNs only and a whole
// image of them.
TEST_F(CudaMaxPool, TiesAndNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = testing_cuda::sample(kInt64, {2, 16, 8, 9}, 5).to(kFloat64);
  x.select(0, 0).select(0, 1).select(0, 2).select(0, 3).fill_(nan);
  x.select(0, 0).select(0, 1).select(0, 2).select(0, 4).fill_(nan);
  x.select(0, 1).select(0, 9).narrow(0, 3, 3).narrow(1, 3, 3).fill_(nan);
  x.select(0, 1).select(0, 15).fill_(nan);
  for (DType d : kDTypes)
    for (MemoryFormat format : {MemoryFormat::kContiguous, kCL})
      for (const Window& w : kWindows) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + layout_name(format) + ", " + w.name);
        expect_matches_cpu(x.to(d), w, format, 6);
      }
}

// Values that all equal -inf, or the lowest finite value: the window's first
// tap is the index, as on the CPU.
TEST_F(CudaMaxPool, WindowsOfMinusInfinity) {
  for (DType d : kDTypes)
    for (MemoryFormat format : {MemoryFormat::kContiguous, kCL}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + layout_name(format));
      Tensor x = full({1, 8, 5, 6}, -std::numeric_limits<double>::infinity(), TensorOptions(d));
      x.select(1, 3).fill_(-1e4);
      expect_matches_cpu(x, kWindows[0], format, 7);
      expect_matches_cpu(x, kWindows[4], format, 8);
    }
}

// The ResNet stem's pooling on a channels-last float16/bfloat16 batch (64
// channels: the kernels' 16-byte channel groups), smaller in N and H, W.
TEST_F(CudaMaxPool, ResNetStemShapeChannelsLast) {
  for (DType d : {kFloat16, kBFloat16, kFloat32}) {
    SCOPED_TRACE(dtype_name(d));
    expect_matches_cpu(testing::half_sample(d, {2, 64, 28, 28}, 9), kWindows[0], kCL, 10);
  }
}

// A channels-last input whose data starts one element past a 16-byte
// boundary (a view into a larger buffer): the kernels fall back to one
// channel a thread, with the same results, read in place.
TEST_F(CudaMaxPool, MisalignedChannelsLastInput) {
  for (DType d : kDTypes) {
    SCOPED_TRACE(dtype_name(d));
    const IntList sizes = {2, 16, 7, 6};
    const int64_t n = 2 * 16 * 7 * 6;
    const Tensor values = testing::half_sample(d, {n}, 11);
    Tensor buffer = zeros({n + 1}, TensorOptions(d).device(kGpu));
    buffer.narrow(0, 1, n).copy_(values.to(kGpu));
    const Tensor x = buffer.narrow(0, 1, n).view({2, 7, 6, 16}).permute({0, 3, 1, 2});
    ASSERT_TRUE(x.is_contiguous(kCL));
    const Tensor want_x = values.view({2, 7, 6, 16}).permute({0, 3, 1, 2});
    const Window& w = kWindows[0];
    const DType ref = reference_dtype(d);
    auto [want_out, want_ix] = native::max_pool2d_with_indices(
        want_x.to(ref), w.kernel, w.stride, w.padding, w.dilation, w.ceil);
    const Tensor go = testing::half_sample(d, want_out.sizes(), 12);
    const Tensor want_gi = native::max_pool2d_backward(go.to(ref), sizes, w.kernel, w.stride,
                                                       w.padding, w.dilation, w.ceil, want_ix);
    // The gradient, misaligned the same way.
    Tensor go_buffer = zeros({go.numel() + 1}, TensorOptions(d).device(kGpu));
    const IntList go_nhwc = {go.size(0), go.size(2), go.size(3), go.size(1)};
    go_buffer.narrow(0, 1, go.numel())
        .copy_(go.permute({0, 2, 3, 1}).contiguous().view({-1}).to(kGpu));
    const Tensor gog = go_buffer.narrow(0, 1, go.numel()).view(go_nhwc).permute({0, 3, 1, 2});
    ASSERT_TRUE(gog.is_contiguous(kCL));
    const Pooled got = pool(x, gog, w);
    EXPECT_TRUE(Exactly(got.out, want_out.to(d)));
    EXPECT_TRUE(Exactly(got.indices, want_ix));
    EXPECT_TRUE(Exactly(got.grad_input, want_gi.to(d)));
    EXPECT_TRUE(got.grad_input.is_contiguous(kCL));
  }
}

// Through autograd (nn::MaxPool2d and the functional max_pool2d): the
// input's gradient has the input's dtype and the CPU's values (16-bit: its
// float32 result rounded), and leaves the pooling in the input's layout.
TEST_F(CudaMaxPool, AutogradGradientHasTheInputsDtypeAndLayout) {
  nn::MaxPool2d stem(nn::MaxPool2dOptions(3).stride(2).padding(1));
  for (DType d : kDTypes)
    for (MemoryFormat format : {MemoryFormat::kContiguous, kCL})
      for (bool functional : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + layout_name(format) +
                     (functional ? " max_pool2d" : " nn::MaxPool2d"));
        const Tensor x0 = testing::half_sample(d, {2, 8, 10, 9}, 13);
        const Tensor x = x0.to(kGpu).contiguous(format).requires_grad_();
        // The gradient as the pooling's backward hands it to the leaf (the
        // engine's accumulation into .grad may re-lay it out).
        Tensor arriving;
        x.register_hook([&](const Tensor& g) {
          arriving = g;
          return Tensor();
        });
        const Tensor y = functional ? max_pool2d(x, {3, 2}, {1, 2}, {1, 1}, {1, 1}, true)
                                    : stem->forward(x);
        const Tensor weight = testing::half_sample(d, y.sizes(), 14);
        (y * weight.to(kGpu)).sum().backward();
        ASSERT_TRUE(x.grad().defined());
        ASSERT_TRUE(arriving.defined());
        EXPECT_EQ(y.dtype(), d);
        EXPECT_EQ(arriving.dtype(), d);
        EXPECT_EQ(x.grad().dtype(), d);
        EXPECT_TRUE(y.is_contiguous(format));
        EXPECT_TRUE(arriving.is_contiguous(format));
        const DType ref = reference_dtype(d);
        const Tensor xr = x0.to(ref).requires_grad_();
        const Tensor yr = functional ? max_pool2d(xr, {3, 2}, {1, 2}, {1, 1}, {1, 1}, true)
                                     : stem->forward(xr);
        (yr * weight.to(ref)).sum().backward();
        EXPECT_TRUE(Exactly(y.detach(), yr.detach().to(d)));
        EXPECT_TRUE(Exactly(x.grad(), xr.grad().to(d)));
      }
}

TEST_F(CudaMaxPool, BackwardChecksItsArguments) {
  const Tensor x = testing_cuda::sample(kFloat16, {2, 3, 8, 8}, 15).to(kGpu);
  auto [out, idx] = native::max_pool2d_with_indices(x, {3}, {2}, {1}, {1}, false);
  // grad_output shaped for other window arguments.
  EXPECT_LOOM_ERROR(native::max_pool2d_backward(out, x.sizes(), {3}, {1}, {1}, {1}, false, idx),
                    "max_pool2d_backward", "expected grad_output of shape", "[2, 3, 8, 8]");
  EXPECT_LOOM_ERROR(
      native::max_pool2d_backward(out, x.sizes(), {3}, {2}, {2}, {1}, false, idx),
      "pad should be at most half");
  EXPECT_LOOM_ERROR(
      native::max_pool2d_backward(out, x.sizes(), {3}, {2}, {1}, {1}, false, idx.cpu()),
      "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::max_pool2d_backward(out, x.sizes(), {3}, {2}, {1}, {1}, false,
                                                idx.narrow(3, 0, 2)),
                    "indices shaped like grad_output");
}

}  // namespace
}  // namespace loom
