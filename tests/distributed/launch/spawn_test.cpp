// distributed::spawn: environment, success, failures (exception, exit code,
// signal) and the timeout.  No tensor work runs in this process before the
// forks (see the fork caveat in Spawn.h).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "distributed/launch/Spawn.h"
#include "tests/PythonRef.h"

namespace loom {
namespace {

using distributed::spawn;
using distributed::SpawnOptions;
using Clock = std::chrono::steady_clock;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(Spawn, EveryRankRunsWithItsEnvironment) {
  const std::string dir = testing::make_temp_dir();
  SpawnOptions options;
  options.master_port = 23456;
  auto context = spawn(
      [&](int rank) {
        LOOM_CHECK(env("RANK") == std::to_string(rank), "RANK is ", env("RANK"));
        LOOM_CHECK(env("LOCAL_RANK") == std::to_string(rank), "LOCAL_RANK is ", env("LOCAL_RANK"));
        LOOM_CHECK(env("WORLD_SIZE") == "3", "WORLD_SIZE is ", env("WORLD_SIZE"));
        LOOM_CHECK(env("LOCAL_WORLD_SIZE") == "3", "LOCAL_WORLD_SIZE is ", env("LOCAL_WORLD_SIZE"));
        LOOM_CHECK(env("MASTER_ADDR") == "127.0.0.1", "MASTER_ADDR is ", env("MASTER_ADDR"));
        LOOM_CHECK(env("MASTER_PORT") == "23456", "MASTER_PORT is ", env("MASTER_PORT"));
        std::ofstream(dir + "/rank" + std::to_string(rank)) << "pid " << ::getpid() << "\n";
      },
      3, options);
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(context->nprocs(), 3);
  EXPECT_TRUE(context->join());  // already joined: returns at once
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(read_file(dir + "/rank" + std::to_string(rank)),
              "pid " + std::to_string(context->pid(rank)) + "\n");
    EXPECT_NE(context->pid(rank), ::getpid());
  }
  // The parent's environment is untouched.
  EXPECT_EQ(std::getenv("MASTER_PORT"), nullptr);
}

TEST(Spawn, PicksAFreePortWhenNoneIsGiven) {
  const std::string dir = testing::make_temp_dir();
  auto context = spawn([&](int) { std::ofstream(dir + "/port") << env("MASTER_PORT"); }, 1);
  EXPECT_GT(context->master_port(), 0);
  EXPECT_EQ(read_file(dir + "/port"), std::to_string(context->master_port()));
}

TEST(Spawn, ThrowingRankNamesRankAndMessage) {
  const auto start = Clock::now();
  EXPECT_LOOM_ERROR(spawn(
                        [](int rank) {
                          if (rank == 2) LOOM_FAIL("bad shard ", 42, " on purpose");
                          if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(100));
                        },
                        3),
                    "spawn: rank 2 failed with exit code 1: bad shard 42 on purpose");
  // Rank 0 sleeping for 100 s was stopped, not waited for.
  EXPECT_LT(seconds_since(start), 5.0);
}

TEST(Spawn, NonStandardExceptionIsReported) {
  EXPECT_LOOM_ERROR(spawn([](int) { throw 3; }, 1), "rank 0 failed with exit code 1",
                    "unknown exception");
}

TEST(Spawn, ExitCodeAndSignalAreNamed) {
  EXPECT_LOOM_ERROR(spawn(
                        [](int rank) {
                          if (rank == 1) ::_exit(7);
                        },
                        2),
                    "spawn: rank 1 failed with exit code 7");
  EXPECT_LOOM_ERROR(spawn([](int rank) {
                      if (rank == 0) ::raise(SIGKILL);
                      std::this_thread::sleep_for(std::chrono::seconds(100));
                    },
                          2),
                    "spawn: rank 0 was killed by signal 9 (Killed)");
}

TEST(Spawn, AbortingRankIsNamed) {
  EXPECT_LOOM_ERROR(spawn([](int rank) {
                      if (rank == 1) {
                        ::signal(SIGABRT, SIG_DFL);
                        std::abort();
                      }
                    },
                          2),
                    "spawn: rank 1 was killed by signal 6");
}

TEST(Spawn, TimeoutKillsSleepingRanks) {
  SpawnOptions options;
  options.timeout = std::chrono::milliseconds(500);
  const auto start = Clock::now();
  EXPECT_LOOM_ERROR(spawn(
                        [](int rank) {
                          if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(100));
                        },
                        3, options),
                    "spawn: timed out after 500 ms: ranks 1, 2 were still running and were killed");
  const double took = seconds_since(start);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 3.0);
}

TEST(Spawn, JoinLaterAndTerminate) {
  SpawnOptions options;
  options.join = false;
  auto context = spawn([](int) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); },
                       2, options);
  EXPECT_FALSE(context->join(std::chrono::milliseconds(0)));
  EXPECT_TRUE(context->join(std::chrono::milliseconds(5000)));

  auto sleeping =
      spawn([](int) { std::this_thread::sleep_for(std::chrono::seconds(100)); }, 2, options);
  const pid_t pid = sleeping->pid(1);
  EXPECT_FALSE(sleeping->join(std::chrono::milliseconds(50)));
  const auto start = Clock::now();
  sleeping->terminate();
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: the pid is gone
}

TEST(Spawn, FailureIsRethrownByLaterJoins) {
  SpawnOptions options;
  options.join = false;
  auto context = spawn([](int) { LOOM_FAIL("nope"); }, 1, options);
  EXPECT_LOOM_ERROR(context->join(), "rank 0 failed with exit code 1: nope");
  EXPECT_LOOM_ERROR(context->join(), "rank 0 failed with exit code 1: nope");
}

TEST(Spawn, BadArgumentsThrow) {
  EXPECT_LOOM_ERROR(spawn([](int) {}, 0), "nprocs must be >= 1, got 0");
  SpawnOptions port;
  port.master_port = 70000;
  EXPECT_LOOM_ERROR(spawn([](int) {}, 1, port), "master_port", "70000");
  SpawnOptions timeout;
  timeout.timeout = std::chrono::milliseconds(-1);
  EXPECT_LOOM_ERROR(spawn([](int) {}, 1, timeout), "timeout");
  EXPECT_LOOM_ERROR(spawn(nullptr, 1), "fn is empty");
}

}  // namespace
}  // namespace loom
