// BatchSchedulingGuard: the calling thread runs under SCHED_BATCH for the
// guard's scope, threads started meanwhile inherit it, and a thread under a
// policy the program chose is left alone.
#include <sched.h>

#include <thread>

#include <gtest/gtest.h>

#include "distributed/gloo/BatchSchedulingGuard.h"

namespace loom {
namespace distributed {
namespace {

// Runs fn on a fresh thread, so a test never changes the runner's policy.
template <typename Fn>
void on_fresh_thread(Fn fn) {
  std::thread thread(fn);
  thread.join();
}

TEST(BatchSchedulingGuard, SwitchesTheCallingThreadForItsScope) {
  on_fresh_thread([] {
    ASSERT_EQ(sched_getscheduler(0), SCHED_OTHER);
    {
      BatchSchedulingGuard guard;
      EXPECT_TRUE(guard.active());
      EXPECT_TRUE(current_thread_is_batch_scheduled());
    }
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  });
}

TEST(BatchSchedulingGuard, DisabledDoesNothing) {
  on_fresh_thread([] {
    BatchSchedulingGuard guard(false);
    EXPECT_FALSE(guard.active());
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  });
}

TEST(BatchSchedulingGuard, ThreadsStartedInsideInheritThePolicy) {
  on_fresh_thread([] {
    bool child_batch = false;
    {
      BatchSchedulingGuard guard;
      std::thread child([&] { child_batch = current_thread_is_batch_scheduled(); });
      child.join();
    }
    EXPECT_TRUE(child_batch);
    bool later_child_batch = true;
    std::thread later([&] { later_child_batch = current_thread_is_batch_scheduled(); });
    later.join();
    EXPECT_FALSE(later_child_batch);
  });
}

TEST(BatchSchedulingGuard, LeavesAPolicyTheProgramChoseAlone) {
  on_fresh_thread([] {
    sched_param param{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_IDLE, &param), 0);
    {
      BatchSchedulingGuard guard;
      EXPECT_FALSE(guard.active());
      EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
    }
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  });
}

}  // namespace
}  // namespace distributed
}  // namespace loom
