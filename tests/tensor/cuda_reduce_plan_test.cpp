// How the CUDA reductions cut the reduced axis (tensor/cuda/ReducePlan.h),
// checked on the CPU: outputs that fill the GPU keep the single-pass kernels;
// a full reduction or a few long columns are cut into chunks that together
// cover the axis exactly, each long enough to be worth a block, within the
// grid's z limit.
#include <gtest/gtest.h>

#include <cstdint>

#include "tensor/cuda/ReducePlan.h"

namespace loom {
namespace cuda {
namespace {

::testing::AssertionResult Covers(const ReducePlan& p, int64_t reduce) {
  if (p.splits < 1 || p.chunk < 1)
    return ::testing::AssertionFailure() << p.splits << " chunks of " << p.chunk;
  // Every chunk but the last is full, the last is not empty.
  if ((p.splits - 1) * p.chunk >= reduce || p.splits * p.chunk < reduce)
    return ::testing::AssertionFailure()
           << p.splits << " chunks of " << p.chunk << " do not tile " << reduce << " values";
  return ::testing::AssertionSuccess();
}

TEST(ReducePlan, FullReductionFillsTheGpu) {
  const ReducePlan p = plan_reduce(1, 100000000, 1, 132);
  EXPECT_GE(p.splits, 132);
  EXPECT_LE(p.splits, 132 * kReduceBlocksPerSm);
  EXPECT_TRUE(Covers(p, 100000000));
  EXPECT_GE(p.chunk, kReduceMinRowChunk);
}

TEST(ReducePlan, FewColumnsOverALongAxisAreCut) {
  // A bias gradient: sum over a batch of 65536 rows of 64 columns (2 blocks).
  const ReducePlan p = plan_reduce(1, 65536, 64, 132);
  EXPECT_GT(p.splits, 1);
  EXPECT_TRUE(Covers(p, 65536));
  EXPECT_GE(p.chunk, kReduceMinColumnChunk);
  EXPECT_GE(p.splits * reduce_single_pass_blocks(1, 65536, 64), 132);
}

TEST(ReducePlan, OutputsThatFillTheGpuStayInOnePass) {
  // Softmax-like rows: 8192 rows of 1000 (1024 blocks of 8 warps).
  EXPECT_EQ(plan_reduce(8192, 1000, 1, 132).splits, 1);
  // Columns: 64 x 4096 outputs.
  EXPECT_EQ(plan_reduce(64, 100, 4096, 132).splits, 1);
}

TEST(ReducePlan, ShortAxesStayWhole) {
  EXPECT_EQ(plan_reduce(1, 1000, 1, 132).splits, 1);  // shorter than one chunk
  EXPECT_EQ(plan_reduce(1, 2 * kReduceMinRowChunk - 1, 1, 132).splits, 1);
  EXPECT_EQ(plan_reduce(1, 2 * kReduceMinRowChunk, 1, 132).splits, 2);
  EXPECT_EQ(plan_reduce(3, 0, 1, 132).splits, 1);  // empty axis
  EXPECT_EQ(plan_reduce(0, 1000000, 1, 132).splits, 1);  // no outputs
  EXPECT_EQ(plan_reduce(1, 1000000, 0, 132).splits, 1);
}

TEST(ReducePlan, ChunksTileTheAxisForManyShapes) {
  for (int sms : {1, 8, 114, 132})
    for (int64_t outer : {1, 2, 3, 7, 64})
      for (int64_t inner : {1, 2, 31, 33, 64, 1000})
        for (int64_t reduce : {1, 5, 4095, 4097, 100003, 3000000, 1 << 26}) {
          const ReducePlan p = plan_reduce(outer, reduce, inner, sms);
          EXPECT_TRUE(Covers(p, reduce)) << outer << " x " << reduce << " x " << inner;
          EXPECT_LE(p.splits, 65535);
          if (p.splits > 1) {
            const int64_t min_chunk = inner == 1 ? kReduceMinRowChunk : kReduceMinColumnChunk;
            EXPECT_GE(p.chunk, min_chunk) << outer << " x " << reduce << " x " << inner;
          }
        }
}

}  // namespace
}  // namespace cuda
}  // namespace loom
