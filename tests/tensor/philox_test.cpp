// Philox4x32-10 (tensor/cuda/Philox.h) on the host, so CI checks the
// generator CUDA dropout uses without a GPU: Random123's known-answer vectors
// (its tests/kat_vectors, the three "philox4x32 10" lines), the counter and
// key layout of philox::draw, and that the words look uniform.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "tensor/cuda/Philox.h"

namespace loom {
namespace {

struct Kat {
  philox::Counter ctr;
  philox::Key key;
  uint32_t expected[4];
};

TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}},
       {{0x00000000u, 0x00000000u}},
       {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       {{0xffffffffu, 0xffffffffu}},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       {{0xa4093822u, 0x299f31d0u}},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const philox::Counter r = philox::philox4x32(k.ctr, k.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.expected[i]) << "word " << i;
  }
}

TEST(Philox, DrawPacksIndexOffsetAndSeed) {
  // draw(seed, offset, index): counter = (index lo, index hi, offset lo,
  // offset hi), key = (seed lo, seed hi).
  const philox::Counter a = philox::draw(0xa4093822ull | (0x299f31d0ull << 32),
                                         0x13198a2eull | (0x03707344ull << 32),
                                         0x243f6a88ull | (0x85a308d3ull << 32));
  EXPECT_EQ(a.v[0], 0xd16cfe09u);
  EXPECT_EQ(a.v[1], 0x94fdccebu);
  EXPECT_EQ(a.v[2], 0x5001e420u);
  EXPECT_EQ(a.v[3], 0x24126ea1u);
  // A pure function: the same inputs give the same words, others differ.
  const philox::Counter b = philox::draw(7, 0, 1), c = philox::draw(7, 0, 1);
  const philox::Counter d = philox::draw(7, 1, 1), e = philox::draw(8, 0, 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.v[i], c.v[i]);
  EXPECT_NE(b.v[0], d.v[0]);
  EXPECT_NE(b.v[0], e.v[0]);
}

TEST(Philox, WordsAreUniformEnoughForDropout) {
  // The keep rate of dropout's test (word >= p * 2^32) over 400k words.
  const double p = 0.3;
  const uint64_t threshold = static_cast<uint64_t>(p * 4294967296.0);
  int64_t kept = 0, n = 0;
  std::set<uint32_t> distinct;
  for (uint64_t q = 0; q < 100000; ++q) {
    const philox::Counter r = philox::draw(12345, 0, q);
    for (int k = 0; k < 4; ++k, ++n) {
      kept += r.v[k] >= threshold;
      if (q < 1000) distinct.insert(r.v[k]);
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.005);
  EXPECT_EQ(distinct.size(), 4000u);  // no repeats among the first 4000 words
}

}  // namespace
}  // namespace loom
