// init_process_group end to end: ranks are forked processes (spawn) that meet
// through env://, tcp:// and file://, run collectives on the default group
// and on sub-groups, and fail with clear errors when misused.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "distributed/DefaultGroup.h"
#include "distributed/launch/Spawn.h"
#include "tensor/Factory.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;

// Throws unless cond: a child's failure reaches spawn's error with the text.
void require(bool cond, const std::string& what) {
  if (!cond) throw Error("check failed: " + what);
}

SpawnOptions quick() {
  SpawnOptions options;
  options.timeout = milliseconds(60000);
  return options;
}

// Every rank contributes rank + 1: the sum over n ranks is n (n + 1) / 2.
void check_sum_on_default_group(int world) {
  Tensor t = full({4}, get_rank() + 1.0);
  all_reduce(t);
  const double expected = world * (world + 1) / 2.0;
  for (float v : t.to_vector<float>()) require(v == expected, "all_reduce sum " + std::to_string(v));
}

TEST(InitProcessGroup, EnvMethodFromSpawnEnvironment) {
  spawn(
      [](int rank) {
        InitOptions options;
        options.timeout = milliseconds(20000);
        init_process_group("gloo", options);
        require(is_initialized(), "initialised");
        require(get_rank() == rank, "rank from RANK");
        require(get_world_size() == 3, "world size from WORLD_SIZE");
        require(get_backend() == "gloo", "backend");
        check_sum_on_default_group(3);
        barrier();
        destroy_process_group();
        require(!is_initialized(), "destroyed");
        require(get_rank() == 0 && get_world_size() == 1, "no group: rank 0 of 1");
      },
      3, quick());
}

TEST(InitProcessGroup, TcpMethodWithExplicitRanks) {
  const SpawnOptions options = quick();
  spawn(
      [](int rank) {
        const std::string url = std::string("tcp://") + std::getenv("MASTER_ADDR") + ":" + std::getenv("MASTER_PORT");
        unsetenv("RANK");
        unsetenv("WORLD_SIZE");
        InitOptions init;
        init.init_method = url;
        init.rank = rank;
        init.world_size = 2;
        init.timeout = milliseconds(20000);
        init_process_group("gloo", init);
        check_sum_on_default_group(2);
        // Blocking send/recv on the default group.
        Tensor t = full({3}, rank == 0 ? 7.0 : 0.0);
        if (rank == 0) send(t, 1);
        else recv(t, 0);
        require(t.to_vector<float>()[2] == 7.0f, "send/recv");
        destroy_process_group();
      },
      2, options);
}

TEST(InitProcessGroup, FileMethod) {
  char dir[] = "/tmp/loom_init_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string url = std::string("file://") + dir + "/rendezvous";
  spawn(
      [&](int) {
        InitOptions init;
        init.init_method = url;
        init.timeout = milliseconds(20000);
        init_process_group("gloo", init);
        check_sum_on_default_group(2);
        destroy_process_group();
      },
      2, quick());
}

TEST(InitProcessGroup, NewGroupOfSomeRanks) {
  spawn(
      [](int rank) {
        InitOptions options;
        options.timeout = milliseconds(20000);
        init_process_group("gloo", options);
        // Ranks 1 and 2 form a group; rank 0 is not a member.
        ProcessGroupPtr pair = new_group({1, 2});
        if (rank == 0) {
          require(pair == nullptr, "non-member gets null");
        } else {
          require(pair != nullptr && pair->size() == 2 && pair->rank() == rank - 1, "member rank");
          Tensor t = full({2}, static_cast<double>(rank));
          all_reduce(t, ReduceOp::Max, pair);
          require(t.to_vector<float>()[0] == 2.0f, "max over the sub-group");
        }
        // The default group still works after making a sub-group.
        check_sum_on_default_group(3);
        destroy_process_group();
      },
      3, quick());
}

TEST(InitProcessGroup, PeerThatNeverComesTimesOut) {
  // World size 2 but only rank 0 starts: the rendezvous gives up after the
  // timeout with an error instead of waiting forever.
  SpawnOptions options = quick();
  try {
    spawn(
        [](int) {
          setenv("WORLD_SIZE", "2", 1);
          InitOptions init;
          init.timeout = milliseconds(1500);
          init_process_group("gloo", init);
        },
        1, options);
    FAIL() << "expected the lone rank to time out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 failed"), std::string::npos) << e.what();
  }
}

TEST(InitProcessGroup, Misuse) {
  EXPECT_LOOM_ERROR(init_process_group("mpi"), "unknown backend 'mpi'");
  EXPECT_LOOM_ERROR(default_group(), "call distributed::init_process_group first");
  Tensor t = ones({2});
  EXPECT_LOOM_ERROR(all_reduce(t), "not initialised");
  EXPECT_LOOM_ERROR(new_group({0}), "call init_process_group first");
  EXPECT_EQ(get_rank(), 0);
  EXPECT_EQ(get_world_size(), 1);
}

}  // namespace
}  // namespace distributed
}  // namespace loom
