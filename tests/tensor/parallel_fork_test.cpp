// A process forked after its parent ran OpenMP parallel regions must still
// run tensor ops (serially), not hang in libgomp.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "loom.h"

namespace loom {
namespace {

double sum_of_ones(int64_t n) { return ones({n}).add(ones({n})).sum().item(); }

TEST(ParallelFork, ChildOfParallelParentRunsOpsSerially) {
  set_num_threads(2);
  const int64_t n = 4 * 1000 * 1000;  // large enough to use both threads
  ASSERT_EQ(sum_of_ones(n), 2.0 * n);
  EXPECT_FALSE(forked_after_parallel_region());

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang becomes SIGALRM instead of a stuck test
    const bool serial = forked_after_parallel_region() && get_num_threads() == 1;
    const bool ok = sum_of_ones(n) == 2.0 * n;
    _exit(serial && ok ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent keeps its threads.
  EXPECT_EQ(get_num_threads(), 2);
}

}  // namespace
}  // namespace loom
