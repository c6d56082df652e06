// Balance helpers: the contiguous min-max partition, and profiling by time and
// by size on synthetic Sequentials.
#include "pipeline/Balance.h"

#include <chrono>
#include <limits>
#include <thread>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using pipeline::balance_by_size;
using pipeline::balance_by_time;
using pipeline::partition_costs;

// The smallest max-stage cost over every contiguous split (brute force).
double brute_force_best(const std::vector<double>& costs, int64_t stages, size_t start = 0) {
  if (stages == 1) {
    double s = 0;
    for (size_t i = start; i < costs.size(); ++i) s += costs[i];
    return s;
  }
  double best = std::numeric_limits<double>::infinity(), first = 0;
  for (size_t end = start + 1; end + stages - 1 <= costs.size(); ++end) {
    first += costs[end - 1];
    best = std::min(best, std::max(first, brute_force_best(costs, stages - 1, end)));
  }
  return best;
}

double max_stage(const std::vector<double>& costs, const std::vector<int64_t>& sizes) {
  double worst = 0;
  size_t i = 0;
  for (int64_t n : sizes) {
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += costs[i++];
    worst = std::max(worst, s);
  }
  EXPECT_EQ(i, costs.size());
  return worst;
}

TEST(Balance, PartitionMinimisesTheLargestStage) {
  EXPECT_EQ(partition_costs({1, 1, 1, 3}, 2), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(partition_costs({5, 1, 1, 1, 1, 1}, 2), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(partition_costs({1, 1, 1, 1}, 4), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(partition_costs({2, 3}, 1), (std::vector<int64_t>{2}));
  Generator gen(11);
  for (int trial = 0; trial < 20; ++trial) {
    const auto values = rand({9}, kFloat64, &gen).to_vector<double>();
    for (int64_t stages = 1; stages <= 4; ++stages) {
      auto sizes = partition_costs(values, stages);
      ASSERT_EQ(static_cast<int64_t>(sizes.size()), stages);
      for (int64_t n : sizes) EXPECT_GE(n, 1);
      EXPECT_NEAR(max_stage(values, sizes), brute_force_best(values, stages), 1e-12);
    }
  }
  EXPECT_LOOM_ERROR(partition_costs({1, 2}, 3), "2 layers", "3 stages");
  EXPECT_LOOM_ERROR(partition_costs({1, 2}, 0), "num_stages");
  EXPECT_LOOM_ERROR(partition_costs({1, -2}, 1), "layer 1", "-2");
}

class SleepImpl : public nn::Module {
 public:
  explicit SleepImpl(int ms) : nn::Module("Sleep"), ms_(ms) {}
  Tensor forward(const Tensor& x) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return x;
  }

 private:
  int ms_;
};

TEST(Balance, ByTimeFollowsTheSlowLayers) {
  nn::Sequential net;
  for (int ms : {2, 2, 2, 40}) net->push_back(std::make_shared<SleepImpl>(ms));
  EXPECT_EQ(balance_by_time(net, ones({2, 2}), 2), (std::vector<int64_t>{3, 1}));
  // A unique optimum with a 10 ms margin over the next best split, so timer
  // noise on a loaded machine cannot change it.
  nn::Sequential tail;
  for (int ms : {10, 10, 10, 10, 50, 50}) tail->push_back(std::make_shared<SleepImpl>(ms));
  EXPECT_EQ(balance_by_time(tail, ones({2, 2}), 3), (std::vector<int64_t>{4, 1, 1}));
  const auto times = pipeline::profile_times(net, ones({2, 2}));
  ASSERT_EQ(times.size(), 4u);
  EXPECT_GE(times[3], 0.035);
}

TEST(Balance, BySizeCountsParametersAndActivations) {
  nn::Sequential net(nn::Linear(4, 4), nn::Linear(4, 256), nn::ReLU(), nn::Linear(256, 4));
  const Tensor sample = ones({2, 4});
  const auto sizes = pipeline::profile_sizes(net, sample);
  // 2 x parameter bytes + output bytes (float32).
  EXPECT_EQ(sizes, (std::vector<double>{2 * 20 * 4 + 2 * 4 * 4, 2 * 1280 * 4 + 2 * 256 * 4,
                                        2 * 256 * 4, 2 * 1028 * 4 + 2 * 4 * 4}));
  EXPECT_EQ(balance_by_size(net, sample, 2), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(balance_by_size(net, sample, 4), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(Balance, ProfilingLeavesTheModelUnchanged) {
  nn::Sequential net(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU());
  const auto before = net->state_dict();
  std::vector<Tensor> saved;
  for (const auto& [name, t] : before) saved.push_back(t.clone());
  balance_by_time(net, randn({5, 3}), 2);
  balance_by_size(net, randn({5, 3}), 2);
  size_t i = 0;
  for (const auto& [name, t] : net->state_dict()) EXPECT_TRUE(testing::AllClose(t, saved[i++])) << name;
  EXPECT_TRUE(net->is_training());
  for (const Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_LOOM_ERROR(balance_by_time(net, Tensor(), 2), "sample is undefined");
  EXPECT_LOOM_ERROR(balance_by_size(net, ones({5, 3}), 4), "3 layers", "4 stages");
}

}  // namespace
}  // namespace loom
