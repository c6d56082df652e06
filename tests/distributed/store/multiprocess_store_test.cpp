// Stores shared by real processes (fork): TCPStore clients in children of the
// master's process, and a FileStore opened by two processes.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/store/FileStore.h"
#include "distributed/store/TCPStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing {
namespace {

using distributed::FileStore;
using distributed::TCPStore;
using distributed::TCPStoreOptions;
using distributed::to_string;
using std::chrono::milliseconds;

// Runs body in a forked child; the child exits with body's return value (1 if
// it throws) and never returns into the test framework.
pid_t fork_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  return pid;
}

// Waits for every child up to deadline; kills and reaps the rest after it.
// Returns the exit codes (-1 for a child killed or gone wrong).
std::vector<int> reap(const std::vector<pid_t>& pids, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> codes(pids.size(), -2);
  size_t left = pids.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -2) continue;
      int status = 0;
      const pid_t done = ::waitpid(pids[i], &status, WNOHANG);
      if (done == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        --left;
      }
    }
    if (left > 0) std::this_thread::sleep_for(milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (codes[i] != -2) continue;
    ::kill(pids[i], SIGKILL);
    ::waitpid(pids[i], nullptr, 0);
    codes[i] = -1;
  }
  return codes;
}

TEST(MultiprocessStoreTest, TCPStoreClientsInChildProcesses) {
  TCPStoreOptions master_options;
  master_options.is_master = true;
  master_options.timeout = milliseconds(3000);
  TCPStore master("127.0.0.1", 0, master_options);
  const int port = master.port();

  std::vector<pid_t> children;
  for (int rank = 1; rank <= 3; ++rank) {
    children.push_back(fork_child([port, rank] {
      TCPStoreOptions o;
      o.timeout = milliseconds(3000);
      TCPStore client("127.0.0.1", port, o);
      client.add("joined", 1);
      client.set("rank/" + std::to_string(rank), std::to_string(rank));
      // Stay until the parent has seen everyone, as ranks do.
      client.wait({"done"});
      return to_string(client.get("done")) == "yes" ? 0 : 2;
    }));
    ASSERT_GT(children.back(), 0) << "fork failed";
  }
  bool ok = true;
  try {
    master.wait({"rank/1", "rank/2", "rank/3"}, milliseconds(3000));
    for (int rank = 1; rank <= 3; ++rank)
      EXPECT_EQ(to_string(master.get("rank/" + std::to_string(rank))), std::to_string(rank));
    EXPECT_EQ(master.add("joined", 0), 3);
    master.set("done", std::string("yes"));
  } catch (const Error& e) {
    ok = false;
    ADD_FAILURE() << e.what();
  }
  const std::vector<int> codes = reap(children, milliseconds(5000));
  EXPECT_TRUE(ok);
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "child " << i + 1;
}

TEST(MultiprocessStoreTest, ChildOfADeadMasterFailsInsteadOfHanging) {
  TCPStoreOptions master_options;
  master_options.is_master = true;
  master_options.timeout = milliseconds(3000);
  auto master = std::make_unique<TCPStore>("127.0.0.1", 0, master_options);
  const int port = master->port();
  const pid_t child = fork_child([port] {
    TCPStoreOptions o;
    o.timeout = milliseconds(3000);
    TCPStore client("127.0.0.1", port, o);
    client.set("ready", std::string("1"));
    const auto start = std::chrono::steady_clock::now();
    try {
      client.get("never_set");
    } catch (const Error& e) {
      const bool prompt = std::chrono::steady_clock::now() - start < milliseconds(1500);
      const bool named = std::string(e.what()).find("closed the connection") != std::string::npos;
      return prompt && named ? 0 : 3;
    }
    return 4;
  });
  ASSERT_GT(child, 0);
  master->wait({"ready"}, milliseconds(3000));
  std::this_thread::sleep_for(milliseconds(50));
  master.reset();
  EXPECT_EQ(reap({child}, milliseconds(4000))[0], 0);
}

TEST(MultiprocessStoreTest, FileStoreSharedByTwoProcesses) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir ? dir : "/tmp") + "/filestore_mp_" + std::to_string(::getpid());
  std::remove(path.c_str());
  {
    FileStore store(path, /*world_size=*/2);
    store.set_timeout(milliseconds(3000));
    const pid_t child = fork_child([&path] {
      FileStore peer(path, 2);
      peer.set_timeout(milliseconds(3000));
      peer.set("from_child", std::string("c"));
      peer.add("counter", 10);
      return to_string(peer.get("from_parent")) == "p" ? 0 : 2;
    });
    ASSERT_GT(child, 0);
    store.set("from_parent", std::string("p"));
    store.add("counter", 1);
    EXPECT_EQ(to_string(store.get("from_child")), "c");
    EXPECT_EQ(reap({child}, milliseconds(5000))[0], 0);
    EXPECT_EQ(store.add("counter", 0), 11);
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << "removed while an instance is open";
  }
  // Both instances (world_size 2) are gone: the file is removed.
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0) << path << " was left behind";
}

}  // namespace
}  // namespace testing
}  // namespace loom
