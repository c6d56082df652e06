// How the CUDA batch-norm kernels (BatchNorm.cu) split their work, and the
// arithmetic of their partial sums: plain C++ (LOOM_HOST_DEVICE), so the CPU
// tests check both against the CPU kernels (tensor/cpu/Normalization.cpp),
// the oracle whose results the GPU must reproduce.
//
// Each channel's N x S values are cut into `splits` tiles (rows [r0, r1) of
// the batch x positions [s0, s1) of the spatial run) so that the grid fills
// every SM even when the channels are few (ResNet-50's first layers: 64
// channels of 1.6 M values each at batch 128, where one block per channel
// used 64 of 132 SMs).  A block of threads_x x threads_y threads sums one
// tile: x walks a contiguous spatial run (coalesced), y walks rows, so no
// index is divided.  Partial sums go to scratch; a second kernel combines a
// channel's tiles in a fixed order (deterministic) and finishes the
// statistics.
//
// Forward: one pass.  Each tile sums d = x - K and d^2 in double, K the
// channel's first value (any value of the channel keeps the sums small).
// With s1 = sum d, s2 = sum d^2 over all tiles and m the batch mean rounded to
// T as the CPU rounds it, the squared deviations the CPU sums in its second
// pass are sum (x - m)^2 = s2 - 2 (m - K) s1 + count (m - K)^2.
// Backward: one pass of sum dy and sum dy (x - m), m the saved mean.
#pragma once

#include <cstdint>

#include "tensor/HostDevice.h"
#include "tensor/native/BatchNormShape.h"

namespace loom {
namespace cuda {

constexpr int kBatchNormThreads = 256;
// A tile holds at least this many values, so small inputs keep one block
// per channel (the combine step and the extra blocks cost more than they save).
constexpr int64_t kBatchNormMinTile = 8192;
// Blocks wanted per SM across all channels.
constexpr int kBatchNormBlocksPerSm = 4;

struct BatchNormPlan {
  int threads_x = 1, threads_y = kBatchNormThreads;  // threads_x * threads_y == 256
  int64_t row_splits = 1, rows_per_split = 1;         // over the batch
  int64_t col_splits = 1, cols_per_split = 1;         // over the spatial run
  LOOM_HOST_DEVICE int64_t splits() const { return row_splits * col_splits; }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The tiles for shape s on a GPU with `sm_count` SMs (s.batch, s.spatial >= 1).
inline BatchNormPlan plan_batch_norm(const native::BatchNormShape& s, int sm_count) {
  BatchNormPlan p;
  // An empty batch or run still gets a plan (of empty tiles).
  const int64_t N = s.batch > 1 ? s.batch : 1, C = s.channels, S = s.spatial > 1 ? s.spatial : 1;
  // x threads: the spatial run rounded up to a power of two, at most a block.
  while (p.threads_x < S && p.threads_x < kBatchNormThreads) p.threads_x *= 2;
  p.threads_y = kBatchNormThreads / p.threads_x;
  const int64_t per_channel = N * S;
  const int64_t want_blocks = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * kBatchNormBlocksPerSm;
  int64_t want = C > 0 ? ceil_div(want_blocks, C) : 1;
  const int64_t by_size = per_channel / kBatchNormMinTile;
  if (want > by_size) want = by_size;
  if (want < 1) want = 1;
  // Rows first (each row is a contiguous run), then cut the runs.
  p.row_splits = want < N ? want : N;
  p.rows_per_split = ceil_div(N, p.row_splits);
  p.row_splits = ceil_div(N, p.rows_per_split);
  int64_t cols = ceil_div(want, p.row_splits);
  const int64_t max_cols = ceil_div(S, p.threads_x);  // at least one x-row of threads each
  if (cols > max_cols) cols = max_cols;
  p.cols_per_split = ceil_div(S, cols);
  p.col_splits = ceil_div(S, p.cols_per_split);
  return p;
}

// Tile t's rows [r0, r1) and positions [s0, s1).
struct BatchNormTile {
  int64_t r0, r1, s0, s1;
};

LOOM_HOST_DEVICE inline BatchNormTile batch_norm_tile(const BatchNormPlan& p,
                                                       const native::BatchNormShape& s,
                                                       int64_t t) {
  const int64_t rs = t / p.col_splits, cs = t - rs * p.col_splits;
  BatchNormTile tile;
  tile.r0 = rs * p.rows_per_split;
  tile.r1 = tile.r0 + p.rows_per_split < s.batch ? tile.r0 + p.rows_per_split : s.batch;
  tile.s0 = cs * p.cols_per_split;
  tile.s1 = tile.s0 + p.cols_per_split < s.spatial ? tile.s0 + p.cols_per_split : s.spatial;
  return tile;
}

// sum (x - m)^2 over the channel from the shifted sums (see the top).
LOOM_HOST_DEVICE inline double squared_deviations(double s1, double s2, double count, double shift,
                                                  double rounded_mean) {
  const double e = rounded_mean - shift;
  const double sq = s2 - 2.0 * e * s1 + count * e * e;
  return sq > 0 ? sq : 0.0;
}

}  // namespace cuda
}  // namespace loom
