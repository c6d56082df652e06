// How the channels-last (NHWC) CUDA batch-norm kernels
// (BatchNormChannelsLast.cu) split their work: plain C++, so the CPU tests
// (tests/tensor/cuda_batch_norm_channels_last_plan_test.cpp) check the grid
// the GPU would get.
//
// A channels-last input is an M x C row-major matrix, M = N * H * W rows of
// the C channels of one pixel, and batch norm reduces each column.  A block
// is threads_x x threads_y threads: x runs along a row (threads side by side
// take neighbouring channels, `vec` channels each as one aligned load, so a
// warp reads whole runs of a row: coalesced), y runs down the rows.  The
// channels are cut into channel_tiles tiles of tile_channels = threads_x * vec
// columns (threads_x at most a warp, so rows of 2048 channels give 16 tiles
// of 128 floats), the rows into row_splits runs of rows_per_split:
//
//   statistics  grid (row_splits, channel_tiles): block (i, j) sums the rows
//               of split i for the columns of tile j (a thread sums its
//               columns down every threads_y-th row, then the block adds
//               its threads_y rows of sums in order in shared memory) and
//               writes one partial sum per column to scratch[i][c]; a
//               second kernel adds each column's row_splits partials in
//               order (deterministic) and finishes the statistics.
//   apply       grid (apply_row_blocks, channel_tiles): each thread keeps
//               its columns' coefficients in registers and strides down the
//               rows (no index is divided).
//
// row_splits is picked so the statistics grid has kBatchNormBlocksPerSm
// blocks per SM across all tiles, but each block at least kBatchNormMinTile
// values (small inputs keep one split: the second kernel and the extra
// blocks would cost more than they save).  ResNet-50 at batch 256 on an
// H100 (132 SMs): [256, 64, 112, 112] is 3.2 M rows of 64 channels, one
// tile (16 x 16 threads of 4 channels), 528 splits of ~6,100 rows;
// [256, 2048, 7, 7] is 12,544 rows, 16 tiles (32 x 8 threads), 33 splits.
#pragma once

#include <cstdint>

#include "tensor/cuda/BatchNormPlan.h"
#include "tensor/native/BatchNormShape.h"

namespace loom {
namespace cuda {

// Channels per thread where every row is aligned to them (C a multiple, the
// pointers aligned to vec elements): one 16-byte load of float32 (8 of
// 16-bit floats, two of float64).
constexpr int kBatchNormChannelsLastVec = 4;
// Blocks per SM the elementwise pass asks for (a full H100 SM at 256 threads).
constexpr int kBatchNormApplyBlocksPerSm = 8;
// The most blocks the grid's y dimension takes; kernels loop over more tiles.
constexpr int64_t kBatchNormMaxGridY = 65535;

struct BatchNormChannelsLastPlan {
  int vec = 1;                                       // channels per thread: 1 or 4
  int threads_x = 1, threads_y = kBatchNormThreads;  // threads_x * threads_y == 256
  int64_t tile_channels = 1, channel_tiles = 1;      // tile_channels = threads_x * vec
  int64_t row_splits = 1, rows_per_split = 1;        // the statistics passes
  int64_t apply_row_blocks = 1;                      // the elementwise passes
};

// The vector width the shape allows (the kernels still fall back to 1 where
// a pointer is not aligned to it).
inline int batch_norm_channels_last_vec(const native::BatchNormShape& s) {
  return s.channels % kBatchNormChannelsLastVec == 0 ? kBatchNormChannelsLastVec : 1;
}

// The plan for shape s (rows M = s.batch * s.spatial) on a GPU of `sm_count`
// SMs with `vec` channels per thread (1, or 4 when s.channels is a multiple).
inline BatchNormChannelsLastPlan plan_batch_norm_channels_last(const native::BatchNormShape& s,
                                                               int sm_count, int vec) {
  BatchNormChannelsLastPlan p;
  // An empty input still gets a plan (of empty splits).
  const int64_t M = s.batch * s.spatial > 1 ? s.batch * s.spatial : 1;
  const int64_t C = s.channels > 1 ? s.channels : 1;
  p.vec = vec;
  // x threads: the row's vectors rounded up to a power of two, at most a warp.
  const int64_t lanes = ceil_div(C, vec);
  p.threads_x = 1;
  while (p.threads_x < lanes && p.threads_x < 32) p.threads_x *= 2;
  p.threads_y = kBatchNormThreads / p.threads_x;
  p.tile_channels = static_cast<int64_t>(p.threads_x) * vec;
  p.channel_tiles = ceil_div(C, p.tile_channels);
  const int64_t sms = sm_count > 0 ? sm_count : 1;

  const int64_t tile_width = C < p.tile_channels ? C : p.tile_channels;
  int64_t splits = ceil_div(sms * kBatchNormBlocksPerSm, p.channel_tiles);
  const int64_t by_size = M * tile_width / kBatchNormMinTile;
  if (splits > by_size) splits = by_size;
  if (splits < 1) splits = 1;
  p.rows_per_split = ceil_div(M, splits);
  p.row_splits = ceil_div(M, p.rows_per_split);

  const int64_t tiles_y = p.channel_tiles < kBatchNormMaxGridY ? p.channel_tiles
                                                                : kBatchNormMaxGridY;
  int64_t blocks = ceil_div(sms * kBatchNormApplyBlocksPerSm, tiles_y);
  const int64_t row_groups = ceil_div(M, p.threads_y);
  if (blocks > row_groups) blocks = row_groups;
  p.apply_row_blocks = blocks > 1 ? blocks : 1;
  return p;
}

// The most row splits any vector width gives shape s: the partial sums the
// scratch must hold (the launch picks the width once it sees the pointers).
inline int64_t batch_norm_channels_last_max_splits(const native::BatchNormShape& s,
                                                   int sm_count) {
  const int64_t one = plan_batch_norm_channels_last(s, sm_count, 1).row_splits;
  const int vec = batch_norm_channels_last_vec(s);
  if (vec == 1) return one;
  const int64_t wide = plan_batch_norm_channels_last(s, sm_count, vec).row_splits;
  return one > wide ? one : wide;
}

}  // namespace cuda
}  // namespace loom
