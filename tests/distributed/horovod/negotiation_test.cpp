// hvd's negotiation rounds without any process: matching by name whatever
// the order, tensor fusion up to the threshold, errors when ranks disagree
// (the same on every rank), joined ranks and join's result, stalls.
#include "distributed/horovod/Negotiation.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

Descriptor allreduce(const std::string& name, int64_t count, DType dtype = kFloat32,
                     ReduceOp op = ReduceOp::Avg) {
  Descriptor d;
  d.name_hash = hash_name(name);
  d.kind = OpKind::kAllreduce;
  d.dtype = dtype;
  d.count = count;
  d.arg = static_cast<int64_t>(op);
  d.shape_hash = hash_sizes({count});
  return d;
}

Descriptor broadcast(const std::string& name, int64_t count, int root) {
  Descriptor d = allreduce(name, count);
  d.kind = OpKind::kBroadcast;
  d.arg = root;
  return d;
}

Descriptor gather(const std::string& name, int64_t row, OpKind kind = OpKind::kAllgather) {
  Descriptor d = allreduce(name, row);
  d.kind = kind;
  d.arg = 0;
  d.shape_hash = hash_sizes({row});
  return d;
}

Record active(std::vector<Descriptor> entries, int64_t threshold = 1 << 20) {
  Record r;
  r.fusion_threshold = threshold;
  r.entries = std::move(entries);
  return r;
}

Record joined(RankStatus status = RankStatus::kJoined, int64_t threshold = 1 << 20) {
  Record r;
  r.status = status;
  r.fusion_threshold = threshold;
  return r;
}

// The entries of a round as the names they were made from.
std::vector<std::string> names(const Round& round, const std::vector<std::string>& candidates) {
  std::vector<std::string> out;
  for (const auto& e : round.entries)
    for (const auto& c : candidates)
      if (hash_name(c) == e.desc.name_hash) out.push_back(c);
  return out;
}

TEST(HvdNegotiation, RecordsRoundTripThroughTheirFixedSizeEncoding) {
  Record r = active({allreduce("a", 12), broadcast("b", 3, 1), gather("c", 5, OpKind::kAlltoall)}, 4096);
  r.stalled = true;
  std::vector<int64_t> words(Record::kLength, -7);
  r.encode(words.data());
  const Record back = Record::decode(words.data(), 0);
  EXPECT_EQ(back.status, RankStatus::kActive);
  EXPECT_EQ(back.fusion_threshold, 4096);
  EXPECT_TRUE(back.stalled);
  ASSERT_EQ(back.entries.size(), 3u);
  EXPECT_EQ(back.entries[1].kind, OpKind::kBroadcast);
  EXPECT_EQ(back.entries[1].arg, 1);
  EXPECT_EQ(back.entries[2].kind, OpKind::kAlltoall);
  EXPECT_EQ(back.entries[0].name_hash, hash_name("a"));
  EXPECT_EQ(back.entries[0].shape_hash, hash_sizes({12}));
  // A record fits in gloo's 4 KiB inline payload.
  EXPECT_LE(Record::kLength * 8, 4096);

  words[0] = 42;
  EXPECT_LOOM_ERROR(Record::decode(words.data(), 3), "rank 3", "malformed");
  Record too_many;
  too_many.entries.assign(Record::kMaxEntries + 1, allreduce("x", 1));
  EXPECT_LOOM_ERROR(too_many.encode(words.data()), "at most 64 entries");
}

TEST(HvdNegotiation, MatchesByNameWhateverTheOrderAndKeepsTheRestQueued) {
  // Rank 1 produced its gradients in another order and has not produced "b".
  const Round round = plan_round({active({allreduce("a", 4), allreduce("b", 4), allreduce("c", 4)}),
                                  active({allreduce("c", 4), allreduce("a", 4)})});
  EXPECT_FALSE(round.all_joined);
  EXPECT_EQ(names(round, {"a", "b", "c"}), (std::vector<std::string>{"a", "c"}));  // rank 0's order
  EXPECT_EQ(round.entries[0].position, (std::vector<int>{0, 1}));
  EXPECT_EQ(round.entries[1].position, (std::vector<int>{2, 0}));
  // Both fit one fused buffer.
  ASSERT_EQ(round.groups.size(), 1u);
  EXPECT_EQ(round.groups[0], (std::vector<size_t>{0, 1}));
  // Nothing in common: nothing to do, nothing lost.
  const Round none = plan_round({active({allreduce("a", 4)}), active({allreduce("b", 4)})});
  EXPECT_TRUE(none.entries.empty());
  EXPECT_TRUE(none.groups.empty());
  EXPECT_EQ(ranks_without({active({allreduce("a", 4)}), active({allreduce("b", 4)})}, hash_name("a")),
            (std::vector<int>{1}));
}

TEST(HvdNegotiation, FusesCompatibleTensorsUpToTheThreshold) {
  // 100 floats = 400 bytes; threshold 1000 bytes.
  const std::vector<Descriptor> entries = {
      allreduce("a", 100),                                   // 400 B
      allreduce("b", 100, kFloat64),                         // other dtype
      allreduce("c", 100),                                   // 400 B: fits with a
      allreduce("d", 100),                                   // 400 B: would make 1200
      allreduce("e", 100, kFloat32, ReduceOp::Sum),          // other op
      allreduce("f", 50),                                    // 200 B: fits with a, c
      allreduce("g", 1000),                                  // 4000 B: alone, over the limit
      broadcast("h", 10, 0), broadcast("i", 10, 1), broadcast("j", 10, 0),
      gather("k", 3), gather("l", 3),                        // never fused
  };
  const Round round = plan_round({active(entries, 1000), active(entries, 1000)});
  ASSERT_EQ(round.entries.size(), entries.size());
  const std::vector<std::vector<size_t>> expected = {{0, 2, 5}, {1}, {3}, {4}, {6}, {7, 9}, {8}, {10}, {11}};
  EXPECT_EQ(round.groups, expected);
  // Threshold 0: no fusion at all.
  const Round unfused = plan_round({active(entries, 0), active(entries, 0)});
  EXPECT_EQ(unfused.groups.size(), entries.size());
  // Ranks must agree on the threshold.
  EXPECT_LOOM_ERROR(plan_round({active(entries, 1000), active(entries, 999)}), "fusion thresholds",
                    "rank 0 has 1000", "rank 1 has 999", "HOROVOD_FUSION_THRESHOLD");
}

TEST(HvdNegotiation, RanksThatDisagreeGetTheSameErrorAndNoCollective) {
  Descriptor other_shape = allreduce("w", 12);
  other_shape.shape_hash = hash_sizes({3, 4});
  const Round round = plan_round({active({allreduce("w", 12), allreduce("v", 2), allreduce("x", 5)}),
                                  active({allreduce("w", 10), allreduce("v", 2, kFloat64),
                                          allreduce("x", 5, kFloat32, ReduceOp::Sum)}),
                                  active({other_shape, allreduce("v", 2), allreduce("x", 5)})});
  ASSERT_EQ(round.entries.size(), 3u);
  EXPECT_THAT(round.entries[0].error, ::testing::HasSubstr(
                                          "rank 0 submitted an allreduce (avg) of 12 float32 elements on cpu, "
                                          "rank 1 submitted an allreduce (avg) of 10 float32 elements on cpu"));
  EXPECT_THAT(round.entries[1].error, ::testing::HasSubstr("float64"));
  EXPECT_THAT(round.entries[2].error, ::testing::HasSubstr("(sum)"));
  EXPECT_TRUE(round.groups.empty());
  const Round shapes = plan_round({active({allreduce("w", 12)}), active({other_shape})});
  EXPECT_THAT(shapes.entries[0].error, ::testing::HasSubstr("different shapes"));
  // A kind mismatch under one name.
  const Round kinds = plan_round({active({allreduce("t", 3)}), active({broadcast("t", 3, 0)})});
  EXPECT_THAT(kinds.entries[0].error, ::testing::HasSubstr("broadcast from root 0"));
}

TEST(HvdNegotiation, JoinedRanksMirrorTheActiveOnesAndCannotBeBroadcastRoots) {
  const Round round = plan_round({joined(), active({allreduce("a", 4), broadcast("b", 4, 0), broadcast("c", 4, 2)}),
                                  active({broadcast("c", 4, 2), broadcast("b", 4, 0), allreduce("a", 4)})});
  EXPECT_FALSE(round.all_joined);
  EXPECT_TRUE(round.joined(0));
  EXPECT_FALSE(round.joined(1));
  ASSERT_EQ(round.entries.size(), 3u);
  // Rank 1 is the lowest active rank: its order.
  EXPECT_EQ(names(round, {"a", "b", "c"}), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(round.entries[0].position, (std::vector<int>{-1, 0, 2}));
  EXPECT_THAT(round.entries[1].error, ::testing::HasSubstr("root rank 0 has already joined"));
  EXPECT_EQ(round.entries[2].error, "");
  EXPECT_EQ(round.groups, (std::vector<std::vector<size_t>>{{0}, {2}}));
}

TEST(HvdNegotiation, JoinEndsWhenEveryRankHasJoinedAndNamesTheLastOne) {
  const Round one = plan_round({joined(RankStatus::kJoined), joined(RankStatus::kJoining),
                                joined(RankStatus::kJoined)});
  EXPECT_TRUE(one.all_joined);
  EXPECT_EQ(one.last_joined, 1);
  // Several joining in the same round: the highest rank.
  const Round two = plan_round({joined(RankStatus::kJoining), joined(RankStatus::kJoined),
                                joined(RankStatus::kJoining)});
  EXPECT_EQ(two.last_joined, 2);
  // One rank still active: not done.
  EXPECT_FALSE(plan_round({joined(RankStatus::kJoining), active({allreduce("a", 1)})}).all_joined);
}

TEST(HvdNegotiation, AStallOnAnyRankIsSeenByEveryRank) {
  Record stalled = active({allreduce("a", 1)});
  stalled.stalled = true;
  EXPECT_TRUE(plan_round({active({allreduce("b", 1)}), stalled}).stalled);
  EXPECT_FALSE(plan_round({active({allreduce("b", 1)}), active({allreduce("a", 1)})}).stalled);
}

TEST(HvdNegotiation, DescriptorsDescribeThemselves) {
  EXPECT_EQ(allreduce("a", 12).describe(), "an allreduce (avg) of 12 float32 elements on cpu");
  EXPECT_EQ(broadcast("b", 3, 1).describe(), "a broadcast from root 1 of 3 float32 elements on cpu");
  EXPECT_EQ(gather("c", 5).describe(), "an allgather of float32 rows of 5 elements on cpu");
  EXPECT_EQ(allreduce("a", 12).nbytes(), 48);
  EXPECT_NE(hash_name("a"), hash_name("b"));
  EXPECT_NE(hash_sizes({3, 4}), hash_sizes({4, 3}));
  EXPECT_NE(hash_sizes({12}), hash_sizes({12, 1}));
}

}  // namespace
}  // namespace horovod
}  // namespace distributed
}  // namespace loom
