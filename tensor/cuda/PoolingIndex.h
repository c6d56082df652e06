// Index math of the CUDA pooling backwards (Pooling.cu) that has no CPU
// counterpart: which outputs' windows can contain a given input position.
// The CPU scatters each output's gradient over its window (or, for max
// pooling, to its argmax); the GPU gathers, so each input element needs the
// (short) range of outputs to visit.  The ranges here may include outputs
// whose window misses the position (the kernels check each one exactly);
// they must never leave one out.
//
// __host__ __device__ and free of CUDA types, so CI checks the ranges
// against the CPU's window definitions without a GPU
// (tests/tensor/pooling_index_test.cpp).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom {
namespace cuda {

// Outputs [begin, end) along one axis.
struct OutputRange {
  int64_t begin = 0, end = 0;
};

// The same in the integer type a kernel indexes with (uint32_t or int64_t).
template <typename I>
struct IndexRange {
  I begin = 0, end = 0;
};

// avg_pool2d: output o's window starts at o * stride - pad and spans `kernel`
// positions (before clipping), so it contains i iff
// o * stride <= i + pad < o * stride + kernel.  0 <= i; out >= 1.
LOOM_HOST_DEVICE inline OutputRange avg_pool_outputs_covering(int64_t i, int64_t pad,
                                                             int64_t kernel, int64_t stride,
                                                             int64_t out) {
  const int64_t ip = i + pad;
  OutputRange r;
  r.begin = ip < kernel ? 0 : (ip - kernel) / stride + 1;
  const int64_t last = ip / stride;
  r.end = (last < out - 1 ? last : out - 1) + 1;
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

// adaptive_avg_pool2d: output o's window is [floor(o * in / out),
// ceil((o + 1) * in / out)); position i (0 <= i < in) lies in the windows of
// outputs floor(i * out / in) .. ceil((i + 1) * out / in) - 1.
LOOM_HOST_DEVICE inline OutputRange adaptive_outputs_covering(int64_t i, int64_t in,
                                                             int64_t out) {
  OutputRange r;
  r.begin = (i * out) / in;
  const int64_t end = ((i + 1) * out + in - 1) / in;
  r.end = end < out ? end : out;
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

// max_pool2d: output o's taps along one axis are o * stride - pad + k *
// dilation (0 <= k < kernel), so position i can be one only if
//   o * stride <= i + pad <= o * stride + span - 1,   span = (kernel - 1) * dilation + 1
// (the range may hold outputs whose taps step over i: the kernels compare the
// argmax with i anyway).  I is a signed or unsigned integer type;
// by_stride.div(n) gives n / stride for 0 <= n <= i + pad (an IntDivider, or a
// plain division); 0 <= i; out >= 1.
template <typename I, typename Divider>
LOOM_HOST_DEVICE inline IndexRange<I> max_pool_outputs_covering(I i, I pad, I span, I out,
                                                               const Divider& by_stride) {
  const I ip = i + pad;
  IndexRange<I> r;
  r.begin = ip < span ? I(0) : static_cast<I>(by_stride.div(ip - span) + 1);
  const I last = static_cast<I>(by_stride.div(ip));
  r.end = (last < out - 1 ? last : out - 1) + 1;
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

}  // namespace cuda
}  // namespace loom
