// Index math of the CUDA pooling backwards (Pooling.cu) that has no CPU
// counterpart: which outputs' windows can contain a given input position.
// The CPU scatters each output's gradient over its window; the GPU gathers,
// so each input element needs the (short) range of outputs to visit.  The
// ranges here may include outputs whose window misses the position (the
// kernels check each one exactly); they must never leave one out.
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

}  // namespace cuda
}  // namespace loom
