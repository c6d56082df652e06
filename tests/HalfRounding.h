// The rule of loom's float16/bfloat16 ops, as checks shared by
// tests/tensor/half_nn_ops_test (the CPU) and tests/tensor/cuda_half_test (a
// GPU): an op given 16-bit tensors returns what it returns for the same
// values in float32, rounded once into the 16-bit type, with its float32
// side results (statistics, masks) and integer ones (indices) unchanged.
// expect_nn_ops_round_float32 holds every op that computes a 16-bit input
// in float32 (softmax, log_softmax, layer and group norm, dropout,
// embedding, average pooling, index_add/scatter_add/gather), forward and
// backward, to that rule bit for bit on one device, against the same op's
// float32 result on that device.  Its helpers (half_sample, SameValues,
// RoundedFrom, widened, kHalfDTypes) also serve tests/tensor/half_ops_test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "loom.h"
#include "tensor/native/Dropout.h"
#include "tensor/native/Embedding.h"
#include "tensor/native/GroupNorm.h"
#include "tensor/native/Index.h"
#include "tensor/native/LayerNorm.h"
#include "tensor/native/Pooling.h"
#include "tensor/native/Softmax.h"

namespace loom {
namespace testing {

inline const DType kHalfDTypes[] = {kFloat16, kBFloat16};

// Values in (-3, 3) with every seventh one 0, representable in `dtype`, on
// `device`.
inline Tensor half_sample(DType dtype, IntList sizes, uint64_t seed, Device device = Device()) {
  Generator gen(seed);
  std::vector<float> values =
      (rand(sizes, TensorOptions(kFloat32), &gen) * 6.0 - 3.0).to_vector<float>();
  for (size_t i = 0; i < values.size(); i += 7) values[i] = 0.0f;
  return tensor(values, sizes).to(dtype).to(device);
}

inline Tensor widened(const Tensor& t) { return t.to(kFloat32); }

// got has want's dtype, shape and values (any NaN equals any NaN).
inline ::testing::AssertionResult SameValues(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << " vs " << want.dtype();
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.sizes()) << " vs "
                                         << shape_str(want.sizes());
  const auto a = got.cpu().to_vector<double>(), b = want.cpu().to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// got (16-bit) is want (float32) rounded once into got's dtype.
inline ::testing::AssertionResult RoundedFrom(const Tensor& got, const Tensor& want) {
  if (want.dtype() != kFloat32)
    return ::testing::AssertionFailure() << "the reference is " << want.dtype() << ", not float32";
  return SameValues(got, want.to(got.dtype()));
}

// got (16-bit) is want (float32) rounded into got's dtype, or one unit in the
// last place beside it: the rule for kernels that take 16-bit operands as
// they are and accumulate in float32 in their own order (oneDNN's, cuBLAS's).
inline ::testing::AssertionResult WithinOneUlpOfRounded(const Tensor& got, const Tensor& want) {
  const Tensor rounded = want.to(got.dtype());
  if (got.dtype() != rounded.dtype() || got.sizes() != rounded.sizes())
    return SameValues(got, rounded);
  const int mantissa_bits = got.dtype() == kBFloat16 ? 7 : 10;
  const int min_exponent = got.dtype() == kBFloat16 ? -126 : -14;
  const auto a = got.cpu().to_vector<double>(), b = rounded.cpu().to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    int e = 0;
    std::frexp(std::max(std::fabs(a[i]), std::fabs(b[i])), &e);  // |x| in [2^(e-1), 2^e)
    const double ulp = std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa_bits);
    if (std::fabs(a[i] - b[i]) <= ulp) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i]
                                         << " (one ulp: " << ulp << ")";
  }
  return ::testing::AssertionSuccess();
}

inline void expect_softmax_rounds_float32(DType d, Device device) {
  const Tensor x = half_sample(d, {3, 7, 5}, 1, device);
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const Tensor y = native::softmax(x, dim), ly = native::log_softmax(x, dim);
    EXPECT_TRUE(RoundedFrom(y, native::softmax(widened(x), dim)));
    EXPECT_TRUE(RoundedFrom(ly, native::log_softmax(widened(x), dim)));
    const Tensor g = half_sample(d, y.sizes(), 2, device);
    EXPECT_TRUE(RoundedFrom(native::softmax_backward(g, y, dim),
                            native::softmax_backward(widened(g), widened(y), dim)));
    EXPECT_TRUE(RoundedFrom(native::log_softmax_backward(g, ly, dim),
                            native::log_softmax_backward(widened(g), widened(ly), dim)));
  }
}

// Layer norm over the last two dims and group norm in 3 groups, with 16-bit
// affine parameters and without: outputs and all three gradients rounded
// from float32, the float32 statistics equal.
inline void expect_layer_and_group_norm_round_float32(DType d, Device device) {
  const Tensor x = half_sample(d, {4, 6, 3, 5}, 3, device);
  const Tensor g = half_sample(d, x.sizes(), 4, device);
  for (bool affine : {true, false}) {
    SCOPED_TRACE(affine ? "with weight and bias" : "without weight and bias");
    const std::array<bool, 3> mask = {true, affine, affine};
    const Tensor lw = affine ? half_sample(d, {3, 5}, 5, device) : Tensor();
    const Tensor lb = affine ? half_sample(d, {3, 5}, 6, device) : Tensor();
    const auto wide_or_none = [](const Tensor& t) { return t.defined() ? widened(t) : t; };
    auto [y, mean, rstd] = native::layer_norm(x, {3, 5}, lw, lb, 1e-5);
    auto [y32, mean32, rstd32] =
        native::layer_norm(widened(x), {3, 5}, wide_or_none(lw), wide_or_none(lb), 1e-5);
    EXPECT_TRUE(RoundedFrom(y, y32));
    EXPECT_TRUE(SameValues(mean, mean32));
    EXPECT_TRUE(SameValues(rstd, rstd32));
    auto [gi, gw, gb] = native::layer_norm_backward(g, x, {3, 5}, mean, rstd, lw, mask);
    auto [gi32, gw32, gb32] = native::layer_norm_backward(widened(g), widened(x), {3, 5}, mean32,
                                                          rstd32, wide_or_none(lw), mask);
    EXPECT_TRUE(RoundedFrom(gi, gi32));
    if (affine) {
      EXPECT_TRUE(RoundedFrom(gw, gw32));
      EXPECT_TRUE(RoundedFrom(gb, gb32));
    }

    const Tensor gnw = affine ? half_sample(d, {6}, 7, device) : Tensor();
    const Tensor gnb = affine ? half_sample(d, {6}, 8, device) : Tensor();
    auto [z, gmean, grstd] = native::group_norm(x, 3, gnw, gnb, 1e-5);
    auto [z32, gmean32, grstd32] =
        native::group_norm(widened(x), 3, wide_or_none(gnw), wide_or_none(gnb), 1e-5);
    EXPECT_TRUE(RoundedFrom(z, z32));
    EXPECT_TRUE(SameValues(gmean, gmean32));
    EXPECT_TRUE(SameValues(grstd, grstd32));
    auto [hi, hw, hb] = native::group_norm_backward(g, x, gmean, grstd, gnw, 3, mask);
    auto [hi32, hw32, hb32] = native::group_norm_backward(widened(g), widened(x), gmean32,
                                                          grstd32, wide_or_none(gnw), 3, mask);
    EXPECT_TRUE(RoundedFrom(hi, hi32));
    if (affine) {
      EXPECT_TRUE(RoundedFrom(hw, hw32));
      EXPECT_TRUE(RoundedFrom(hb, hb32));
    }
  }
}

// The same generator state drops the same elements; the kept ones are the
// float32 products rounded.
inline void expect_dropout_rounds_float32(DType d, Device device) {
  const Tensor x = half_sample(d, {8, 33}, 9, device);
  for (double p : {0.3, 0.5}) {
    SCOPED_TRACE(::testing::Message() << "p " << p);
    Generator a(10), b(10);
    auto [y, mask] = native::dropout(x, p, &a);
    auto [y32, mask32] = native::dropout(widened(x), p, &b);
    EXPECT_TRUE(RoundedFrom(y, y32));
    EXPECT_TRUE(SameValues(mask, mask32));
  }
}

// Rows picked (repeated indices too), and the backward's sums over repeated
// rows in float32.
inline void expect_embedding_rounds_float32(DType d, Device device) {
  const Tensor w = half_sample(d, {7, 4}, 11, device);
  const Tensor idx = tensor<int64_t>({3, 0, 3, 6, 3, 1}, {2, 3}).to(device);
  EXPECT_TRUE(RoundedFrom(native::embedding(w, idx), native::embedding(widened(w), idx)));
  const Tensor g = half_sample(d, {2, 3, 4}, 12, device);
  EXPECT_TRUE(RoundedFrom(native::embedding_backward(g, idx, 7),
                          native::embedding_backward(widened(g), idx, 7)));
}

// Average pooling with padding and ceil mode, counting the padding or not,
// and adaptive pooling to a size that does not divide the input.
inline void expect_average_pooling_rounds_float32(DType d, Device device) {
  const Tensor x = half_sample(d, {2, 3, 7, 6}, 13, device);
  for (bool count_pad : {true, false}) {
    SCOPED_TRACE(count_pad ? "counting padding" : "not counting padding");
    const Tensor y = native::avg_pool2d(x, {3, 2}, {2, 2}, {1, 1}, true, count_pad);
    EXPECT_TRUE(RoundedFrom(
        y, native::avg_pool2d(widened(x), {3, 2}, {2, 2}, {1, 1}, true, count_pad)));
    const Tensor g = half_sample(d, y.sizes(), 14, device);
    EXPECT_TRUE(RoundedFrom(
        native::avg_pool2d_backward(g, x.sizes(), {3, 2}, {2, 2}, {1, 1}, true, count_pad),
        native::avg_pool2d_backward(widened(g), x.sizes(), {3, 2}, {2, 2}, {1, 1}, true,
                                    count_pad)));
  }
  const Tensor y = native::adaptive_avg_pool2d(x, {3, 4});
  EXPECT_TRUE(RoundedFrom(y, native::adaptive_avg_pool2d(widened(x), {3, 4})));
  const Tensor g = half_sample(d, y.sizes(), 15, device);
  EXPECT_TRUE(RoundedFrom(native::adaptive_avg_pool2d_backward(g, x.sizes()),
                          native::adaptive_avg_pool2d_backward(widened(g), x.sizes())));
}

// index_add and scatter_add accumulate in float32 and round once: 4096 ones
// added into one element give 4096 (a 16-bit accumulator stops at 2048 for
// float16, 256 for bfloat16); gather moves the bits.
inline void expect_index_ops_round_float32(DType d, Device device) {
  const Tensor x = half_sample(d, {5, 4}, 16, device);
  const Tensor src = half_sample(d, {6, 4}, 17, device);
  const Tensor idx = tensor<int64_t>({0, 2, 0, 4, 0, 2}).to(device);
  EXPECT_TRUE(RoundedFrom(native::index_add(x, 0, idx, src),
                          native::index_add(widened(x), 0, idx, widened(src))));
  const Tensor nd = tensor<int64_t>({1, 0, 4, 1, 1, 3, 3, 0}, {2, 4}).to(device);
  const Tensor s2 = half_sample(d, {2, 4}, 18, device);
  EXPECT_TRUE(RoundedFrom(native::scatter_add(x, 0, nd, s2),
                          native::scatter_add(widened(x), 0, nd, widened(s2))));
  EXPECT_TRUE(SameValues(native::gather(x, 0, nd), native::gather(widened(x), 0, nd).to(d)));

  const TensorOptions opts = TensorOptions(d).device(device);
  const Tensor many = zeros({4096}, TensorOptions(kInt64).device(device));
  EXPECT_EQ(native::index_add(zeros({1}, opts), 0, many, ones({4096}, opts)).item<double>(),
            4096.0);
  EXPECT_EQ(native::scatter_add(zeros({1}, opts), 0, many, ones({4096}, opts)).item<double>(),
            4096.0);
}

// Every check above for both 16-bit dtypes on `device`.
inline void expect_nn_ops_round_float32(Device device) {
  for (DType d : kHalfDTypes) {
    SCOPED_TRACE(dtype_name(d));
    {
      SCOPED_TRACE("softmax, log_softmax");
      expect_softmax_rounds_float32(d, device);
    }
    {
      SCOPED_TRACE("layer_norm, group_norm");
      expect_layer_and_group_norm_round_float32(d, device);
    }
    {
      SCOPED_TRACE("dropout");
      expect_dropout_rounds_float32(d, device);
    }
    {
      SCOPED_TRACE("embedding");
      expect_embedding_rounds_float32(d, device);
    }
    {
      SCOPED_TRACE("avg_pool2d, adaptive_avg_pool2d");
      expect_average_pooling_rounds_float32(d, device);
    }
    {
      SCOPED_TRACE("index_add, scatter_add, gather");
      expect_index_ops_round_float32(d, device);
    }
  }
}

}  // namespace testing
}  // namespace loom
