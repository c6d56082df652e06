// cpu::fastest_of: each way runs twice, interleaved, the first round's leader
// last in the second; the fastest is returned and has run last (a third run
// only when the leader lost the second round).
#include <chrono>
#include <thread>

#include "tensor/cpu/TimedChoice.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

// A way that records its index and sleeps for the next of its durations (ms).
std::function<void()> way(int index, std::vector<int> ms, std::vector<int>& calls) {
  auto next = std::make_shared<size_t>(0);
  return [index, ms, next, &calls] {
    calls.push_back(index);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms[std::min(*next, ms.size() - 1)]));
    ++*next;
  };
}

TEST(TimedChoice, LeaderRunsLastInTheSecondRound) {
  std::vector<int> calls;
  const size_t fastest =
      cpu::fastest_of({way(0, {60}, calls), way(1, {2}, calls), way(2, {30}, calls)});
  EXPECT_EQ(fastest, 1u);
  EXPECT_EQ(calls, (std::vector<int>{0, 1, 2, 0, 2, 1}));  // no third run
}

TEST(TimedChoice, ANewLeaderRunsAgainSoItsResultIsLast) {
  std::vector<int> calls;
  // Way 0 is slow the first time only (a cold start), then the fastest.
  const size_t fastest = cpu::fastest_of({way(0, {80, 2}, calls), way(1, {30}, calls)});
  EXPECT_EQ(fastest, 0u);
  EXPECT_EQ(calls, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_TRUE(cpu::first_is_faster(way(0, {2}, calls), way(1, {40}, calls)));
  EXPECT_EQ(calls.back(), 0);
}

}  // namespace
}  // namespace loom
