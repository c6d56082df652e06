// data::DistributedSampler against torch.utils.data.DistributedSampler
// (PyTorch 1.13) for every small case, and the shuffled orders' properties.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using data::DistributedSampler;
using data::DistributedSamplerOptions;

using Case = std::tuple<int, int, int, bool>;  // (size, num_replicas, rank, drop_last)

// Every unshuffled index list for size 0..50, 1..4 replicas, every rank, both
// drop_last, from one python run: lines "n R r d: i i i ...".
std::map<Case, std::vector<int64_t>> torch_reference(std::string& log) {
  const char* script =
      "import torch.utils.data as D\n"
      "for n in range(51):\n"
      "  for R in range(1, 5):\n"
      "    for r in range(R):\n"
      "      for d in (0, 1):\n"
      "        s = D.DistributedSampler(range(n), num_replicas=R, rank=r, shuffle=False, "
      "drop_last=bool(d))\n"
      "        print(n, R, r, d, \":\", *list(s))\n";
  const std::string cmd = "/usr/bin/python3 -c '" + std::string(script) + "' 2>&1";
  std::map<Case, std::vector<int64_t>> out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, pipe)) > 0) log.append(buf, got);
  ::pclose(pipe);
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    int n, R, r, d;
    std::string colon;
    if (!(in >> n >> R >> r >> d >> colon) || colon != ":") continue;
    std::vector<int64_t> indices;
    int64_t i;
    while (in >> i) indices.push_back(i);
    out[Case{n, R, r, d != 0}] = indices;
  }
  return out;
}

DistributedSamplerOptions opts(int replicas, int rank, bool shuffle, bool drop_last = false) {
  return DistributedSamplerOptions().num_replicas(replicas).rank(rank).shuffle(shuffle).drop_last(
      drop_last);
}

TEST(DistributedSampler, EqualsPyTorchWithoutShuffle) {
  std::string log;
  const auto reference = torch_reference(log);
  ASSERT_EQ(reference.size(), 51u * (1 + 2 + 3 + 4) * 2) << log;
  for (const auto& [key, expected] : reference) {
    const auto [n, R, r, d] = key;
    DistributedSampler sampler(n, opts(R, r, false, d));
    const std::string where = "n=" + std::to_string(n) + " R=" + std::to_string(R) +
                              " rank=" + std::to_string(r) + " drop_last=" + std::to_string(d);
    EXPECT_EQ(sampler.indices(), expected) << where;
    EXPECT_EQ(sampler.size(), static_cast<int64_t>(expected.size())) << where;
  }
}

TEST(DistributedSampler, PadsByRepeatingMoreThanOnce) {
  // 2 examples over 4 replicas: the order 0 1 is padded to 0 1 0 1.
  std::vector<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler s(2, opts(4, r, false));
    const auto idx = s.indices();
    all.insert(all.end(), idx.begin(), idx.end());
  }
  EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 0, 1}));
  DistributedSampler dropped(2, opts(4, 3, false, true));
  EXPECT_TRUE(dropped.indices().empty());
  EXPECT_EQ(dropped.size(), 0);
}

// The indices of every rank for one epoch.
std::vector<std::vector<int64_t>> shard(int64_t n, int R, int64_t epoch, bool drop_last,
                                        uint64_t seed = 5) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < R; ++r) {
    DistributedSampler s(n, opts(R, r, true, drop_last).seed(seed));
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

TEST(DistributedSampler, ShuffledRanksPartitionTheDataset) {
  for (int R = 1; R <= 4; ++R) {
    for (int64_t n : {0, 12, 24, 96}) {
      const auto parts = shard(n, R, 3, false);
      std::multiset<int64_t> seen;
      for (const auto& p : parts) {
        EXPECT_EQ(static_cast<int64_t>(p.size()), n / R);
        seen.insert(p.begin(), p.end());
      }
      std::set<int64_t> unique(seen.begin(), seen.end());
      EXPECT_EQ(unique.size(), seen.size()) << "ranks overlap, n=" << n << " R=" << R;
      EXPECT_EQ(static_cast<int64_t>(unique.size()), n);
      if (n > 0) {
        EXPECT_EQ(*unique.begin(), 0);
        EXPECT_EQ(*unique.rbegin(), n - 1);
      }
    }
  }
}

TEST(DistributedSampler, ShuffledUnevenCoversOrDrops) {
  // 10 over 3: padded to 12, every index appears at least once.
  std::set<int64_t> covered;
  for (const auto& p : shard(10, 3, 0, false)) {
    EXPECT_EQ(p.size(), 4u);
    covered.insert(p.begin(), p.end());
  }
  EXPECT_EQ(covered.size(), 10u);
  // With drop_last: 3 each, 9 distinct indices.
  std::set<int64_t> kept;
  for (const auto& p : shard(10, 3, 0, true)) {
    EXPECT_EQ(p.size(), 3u);
    kept.insert(p.begin(), p.end());
  }
  EXPECT_EQ(kept.size(), 9u);
}

TEST(DistributedSampler, SameOrderPerEpochDifferentAcrossEpochs) {
  const auto a = shard(64, 2, 1, false);
  EXPECT_EQ(shard(64, 2, 1, false), a);  // every rank computes the same permutation
  EXPECT_NE(shard(64, 2, 2, false), a);
  EXPECT_NE(shard(64, 2, 1, false, 6), a);  // seed matters
  std::vector<int64_t> sequential(32);
  for (int i = 0; i < 32; ++i) sequential[i] = 2 * i;
  EXPECT_NE(a[0], sequential);  // actually shuffled
}

TEST(DistributedSampler, ReadsWorldSizeAndRankFromEnvironment) {
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("RANK", "2", 1);
  DistributedSampler s(9, DistributedSamplerOptions().shuffle(false));
  EXPECT_EQ(s.num_replicas(), 3);
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{2, 5, 8}));
  ::setenv("RANK", "two", 1);
  EXPECT_LOOM_ERROR(DistributedSampler(9), "RANK", "integer", "two");
  ::unsetenv("RANK");
  EXPECT_LOOM_ERROR(DistributedSampler(9), "rank", "RANK", "not set");
  ::unsetenv("WORLD_SIZE");
  EXPECT_LOOM_ERROR(DistributedSampler(9, DistributedSamplerOptions().rank(0)), "WORLD_SIZE");
}

TEST(DistributedSampler, BadArgumentsThrow) {
  EXPECT_LOOM_ERROR(DistributedSampler(10, opts(2, 2, false)), "invalid rank 2", "[0, 1]");
  EXPECT_LOOM_ERROR(DistributedSampler(10, opts(2, -1, false)), "invalid rank -1");
  EXPECT_LOOM_ERROR(DistributedSampler(10, opts(0, 0, false)), "num_replicas must be >= 1, got 0");
  EXPECT_LOOM_ERROR(DistributedSampler(-1, opts(1, 0, false)), "dataset_size", "-1");
}

// A dataset whose example i is the scalar i.
class Counting : public data::Dataset {
 public:
  explicit Counting(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Example get(int64_t i) const override {
    return {scalar_tensor(static_cast<float>(i)), scalar_tensor(int64_t{0}, kInt64)};
  }

 private:
  int64_t n_;
};

TEST(DistributedSampler, DrivesADataLoader) {
  auto dataset = std::make_shared<Counting>(10);
  auto sampler = std::make_shared<DistributedSampler>(10, opts(2, 1, true));
  data::DataLoader loader(dataset, data::DataLoaderOptions(2), sampler);
  EXPECT_EQ(loader.size(), 3);  // 5 indices in batches of 2
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    sampler->set_epoch(epoch);
    std::vector<int64_t> seen;
    for (const auto& batch : loader)
      for (float v : batch.data.to_vector<float>()) seen.push_back(static_cast<int64_t>(v));
    EXPECT_EQ(seen, sampler->indices());
  }
}

}  // namespace
}  // namespace loom
