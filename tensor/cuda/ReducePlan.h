// How the CUDA reductions (Reduce.cu) cut the reduced axis across blocks:
// plain C++, so the CPU tests check the plans.
//
// A reduction of a contiguous (outer, reduce, inner) block gives outer *
// inner outputs.  The single-pass kernels give each block a few whole
// outputs, so few outputs mean few blocks: a full sum (one output) ran in one
// block of one SM.  When the outputs alone would not fill the GPU, the
// reduced axis is cut into `splits` chunks of `chunk` values: each block
// reduces one chunk of its outputs into a partial result in scratch, and a
// second kernel combines each output's chunks in order (so results stay
// deterministic, and max/min keep the first index of ties).
#pragma once

#include <cstdint>

namespace loom {
namespace cuda {

constexpr int kReduceThreads = 256;
constexpr int kReduceColumnsX = 32;  // adjacent outputs per block when inner > 1
constexpr int64_t kReduceWarpRunLimit = 1024;  // rows up to this long take one warp
constexpr int kReduceBlocksPerSm = 4;
// A chunk is at least this many values of the reduced axis: rows (inner == 1)
// read them as one contiguous run; columns read kReduceColumnsX outputs'
// worth per value.
constexpr int64_t kReduceMinRowChunk = 4096;
constexpr int64_t kReduceMinColumnChunk = 128;

struct ReducePlan {
  int64_t splits = 1;  // chunks of the reduced axis (1: the single-pass kernels)
  int64_t chunk = 0;   // values per chunk (the last may be shorter)
};

// Blocks the single-pass kernels launch for these outputs.
inline int64_t reduce_single_pass_blocks(int64_t outer, int64_t reduce, int64_t inner) {
  if (inner == 1) {
    const int64_t rows_per_block = reduce <= kReduceWarpRunLimit ? kReduceThreads / 32 : 1;
    return (outer + rows_per_block - 1) / rows_per_block;
  }
  return outer * ((inner + kReduceColumnsX - 1) / kReduceColumnsX);
}

inline ReducePlan plan_reduce(int64_t outer, int64_t reduce, int64_t inner, int sm_count) {
  ReducePlan p;
  p.chunk = reduce;
  if (outer * inner == 0 || reduce == 0) return p;
  const int64_t want = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * kReduceBlocksPerSm;
  const int64_t blocks = reduce_single_pass_blocks(outer, reduce, inner);
  if (2 * blocks >= want) return p;
  const int64_t min_chunk = inner == 1 ? kReduceMinRowChunk : kReduceMinColumnChunk;
  int64_t splits = (want + blocks - 1) / blocks;
  const int64_t by_size = reduce / min_chunk;
  if (splits > by_size) splits = by_size;
  if (splits > 65535) splits = 65535;  // the grid's z limit
  if (splits <= 1) return p;
  p.chunk = (reduce + splits - 1) / splits;
  p.splits = (reduce + p.chunk - 1) / p.chunk;
  return p;
}

}  // namespace cuda
}  // namespace loom
