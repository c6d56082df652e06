// The network ops on float16 and bfloat16 tensors on the CPU, forward and
// backward: those that compute a 16-bit input in float32 (softmax, norms,
// dropout, embedding, average pooling, index ops) give the float32 result
// rounded once, bit for bit (tests/HalfRounding.h, which cuda_half_test
// runs on a GPU); matrix products and convolutions give it in float16
// (computed in float32) and within one unit in the last place in bfloat16,
// which runs in oneDNN's kernels where the CPU has them (float32
// accumulation in their own order).
#include "tensor/native/Convolution.h"
#include "tensor/native/Linalg.h"
#include "tests/HalfRounding.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::half_sample;
using testing::kHalfDTypes;
using testing::RoundedFrom;
using testing::widened;
using testing::WithinOneUlpOfRounded;

TEST(HalfNnOps, OpsComputedInFloat32AreTheRoundedResult) {
  testing::expect_nn_ops_round_float32(Device());
}

// float16 exactly as rounded; bfloat16 as rounded or one ulp beside it.
::testing::AssertionResult AsRounded(const Tensor& got, const Tensor& want) {
  return got.dtype() == kFloat16 ? RoundedFrom(got, want) : WithinOneUlpOfRounded(got, want);
}

TEST(HalfNnOps, MatrixProductsAreTheRoundedFloat32Result) {
  for (DType d : kHalfDTypes) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor a = half_sample(d, {9, 17}, 1), b = half_sample(d, {17, 6}, 2);
    EXPECT_TRUE(AsRounded(native::mm(a, b), native::mm(widened(a), widened(b))));
    const Tensor ba = half_sample(d, {3, 9, 17}, 3), bb = half_sample(d, {3, 17, 6}, 4);
    EXPECT_TRUE(AsRounded(native::bmm(ba, bb), native::bmm(widened(ba), widened(bb))));

    const Tensor x = half_sample(d, {2, 5, 17}, 5), w = half_sample(d, {6, 17}, 6);
    const Tensor bias = half_sample(d, {6}, 7);
    for (const Tensor& bi : {bias, Tensor()}) {
      SCOPED_TRACE(bi.defined() ? "with bias" : "without bias");
      const Tensor wide_bias = bi.defined() ? widened(bi) : bi;
      const Tensor y = native::linear(x, w, bi);
      EXPECT_TRUE(AsRounded(y, native::linear(widened(x), widened(w), wide_bias)));
      const Tensor g = half_sample(d, y.sizes(), 8);
      Tensor gi, gw, gb, gi32, gw32, gb32;
      native::linear_backward(g, x, w, true, true, bi.defined(), gi, gw, gb);
      native::linear_backward(widened(g), widened(x), widened(w), true, true, bi.defined(), gi32,
                              gw32, gb32);
      EXPECT_TRUE(AsRounded(gi, gi32));
      EXPECT_TRUE(AsRounded(gw, gw32));
      if (bi.defined()) {
        EXPECT_TRUE(AsRounded(gb, gb32));
      }
    }
  }
}

TEST(HalfNnOps, ConvolutionsAreTheRoundedFloat32Result) {
  struct Case {
    IntList stride, padding, dilation;
    int64_t groups;
  };
  for (DType d : kHalfDTypes) {
    for (const Case& c : {Case{{1, 1}, {1, 1}, {1, 1}, 1}, Case{{2, 2}, {0, 1}, {1, 1}, 2},
                          Case{{1, 1}, {2, 2}, {2, 2}, 1}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(d) << ", stride " << c.stride[0]
                                        << ", groups " << c.groups << ", dilation "
                                        << c.dilation[0]);
      const Tensor x = half_sample(d, {2, 4, 9, 8}, 9);
      const Tensor w = half_sample(d, {6, 4 / c.groups, 3, 3}, 10), b = half_sample(d, {6}, 11);
      const Tensor y = native::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      EXPECT_TRUE(AsRounded(y, native::conv2d(widened(x), widened(w), widened(b), c.stride,
                                              c.padding, c.dilation, c.groups)));
      const Tensor g = half_sample(d, y.sizes(), 12);
      Tensor gi, gw, gb, gi32, gw32, gb32;
      native::conv2d_backward(g, x, w, c.stride, c.padding, c.dilation, c.groups, true, true,
                              true, gi, gw, gb);
      native::conv2d_backward(widened(g), widened(x), widened(w), c.stride, c.padding,
                              c.dilation, c.groups, true, true, true, gi32, gw32, gb32);
      EXPECT_TRUE(AsRounded(gi, gi32));
      EXPECT_TRUE(AsRounded(gw, gw32));
      EXPECT_TRUE(AsRounded(gb, gb32));
    }
  }
}

}  // namespace
}  // namespace loom
