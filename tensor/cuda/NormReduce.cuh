// Device helpers shared by LayerNorm.cu and GroupNorm.cu: sums over a group of
// threads that owns one row, and the mean / rstd of a row.
//
// Blocks have kNormThreads threads.  A row is owned by a group of 32 threads
// (one warp; kNormThreads / 32 rows per block) when it is short, or by the
// whole block when it is long (norm_group_for).  Sums are in double and in a
// fixed order (a warp butterfly, then the warps' sums one after another), so
// results are deterministic; every lane gets the total.  The statistics use
// the CPU kernels' formulas (tensor/cpu/NormStats.h): two passes, the squared
// deviations from the double mean, an empty row has mean 0 and variance 0.
// The kernels centre values as (x - mean) - dm, dm the rounding error of the
// stored mean, as the CPU's do (NormStats.h says why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace loom {
namespace cuda {

constexpr int kNormThreads = 256;
constexpr int64_t kNormWarpRowLimit = 1024;  // longest row a single warp owns

// Threads per row for rows of `n` values: 32 or kNormThreads.
inline int norm_group_for(int64_t n) { return n <= kNormWarpRowLimit ? 32 : kNormThreads; }

// The sum of v over the group (32 or kNormThreads threads) holding it; every
// thread of the block must call it with the same group.  buf: kNormThreads / 32
// doubles of shared memory.
__device__ __forceinline__ double norm_group_sum(double v, double* buf, int group) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (group == 32) return v;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) buf[warp] = v;
  __syncthreads();
  double total = 0;
  for (int k = 0; k < kNormThreads / 32; ++k) total += buf[k];
  __syncthreads();  // buf is rewritten by the next call
  return total;
}

struct NormMoments {
  double mean;
  double rstd;
};

// Mean and 1 / sqrt(biased variance + eps) of xr[0, n), computed by the group
// (`lane` is this thread's index in it).  A thread of a group without a row
// (valid false) contributes nothing but must still call it.
template <typename T>
__device__ NormMoments norm_row_moments(const T* xr, int64_t n, bool valid, int lane, int group,
                                        double eps, double* buf) {
  double sum = 0;
  if (valid)
    for (int64_t j = lane; j < n; j += group) sum += static_cast<double>(xr[j]);
  sum = norm_group_sum(sum, buf, group);
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double sq = 0;
  if (valid)
    for (int64_t j = lane; j < n; j += group) {
      const double d = static_cast<double>(xr[j]) - mean;
      sq += d * d;
    }
  sq = norm_group_sum(sq, buf, group);
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  return {mean, 1.0 / sqrt(var + eps)};
}

}  // namespace cuda
}  // namespace loom
