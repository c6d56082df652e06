// ProcessGroupGloo across real processes: forked ranks meet through a store
// kept in a temporary directory; collectives across processes; a rank that
// dies makes the others fail promptly with a loom::Error instead of hanging.
//
// The parent only forks and waits (no tensor ops before fork: an OpenMP pool
// does not survive fork).  Each child reports through its exit status; the
// parent kills children that outlive a deadline.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/store/Store.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A Store whose keys are files in a directory shared by the processes (only
// for this test: one lock file serialises every update).
class DirStore : public Store {
 public:
  explicit DirStore(std::string dir) : dir_(std::move(dir)) {}

  void set(const std::string& key, const Bytes& value) override {
    Locked lock(dir_);
    write_file(key, value);
  }
  using Store::set;
  Bytes get(const std::string& key) override {
    wait({key}, timeout_);
    return read_file(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    Locked lock(dir_);
    int64_t value = exists(key) ? std::stoll(to_string(read_file(key))) : 0;
    value += delta;
    write_file(key, to_bytes(std::to_string(value)));
    return value;
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Locked lock(dir_);
    if ((!exists(key) && expected.empty()) || (exists(key) && read_file(key) == expected)) {
      write_file(key, desired);
      return desired;
    }
    return exists(key) ? read_file(key) : Bytes();
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys)
      if (!exists(k)) return false;
    return true;
  }
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (!check(keys)) {
      LOOM_CHECK(Clock::now() < deadline, "DirStore: timed out waiting for ", keys.size(),
                 " keys, the first '", keys.empty() ? "" : keys[0], "'");
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
  using Store::wait;
  bool delete_key(const std::string& key) override {
    Locked lock(dir_);
    return ::unlink(path(key).c_str()) == 0;
  }
  int64_t num_keys() override { LOOM_FAIL("DirStore: num_keys is not needed here"); }

 private:
  struct Locked {
    int fd;
    explicit Locked(const std::string& dir) {
      fd = ::open((dir + "/.lock").c_str(), O_CREAT | O_RDWR, 0600);
      ::flock(fd, LOCK_EX);
    }
    ~Locked() {
      ::flock(fd, LOCK_UN);
      ::close(fd);
    }
  };
  std::string path(const std::string& key) const {
    std::string name;
    for (char c : key) name += (c == '/' ? '%' : c);
    return dir_ + "/k_" + name;
  }
  bool exists(const std::string& key) const { return ::access(path(key).c_str(), F_OK) == 0; }
  void write_file(const std::string& key, const Bytes& value) {
    const std::string tmp = path(key) + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(value.data()), value.size());
    }
    ::rename(tmp.c_str(), path(key).c_str());
  }
  Bytes read_file(const std::string& key) const {
    std::ifstream in(path(key), std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string dir_;
};

std::string make_temp_dir() {
  char tmpl[] = "/tmp/loom_gloo_mp_XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir == nullptr) return "";
  return dir;
}

// Forks `size` ranks running child(rank, store) (exit status = return value;
// an exception prints and exits 99), waits up to `deadline`, kills any left.
// Returns each rank's exit status (-1 when killed).
std::vector<int> run_processes(int size, milliseconds deadline,
                               const std::function<int(int, std::shared_ptr<Store>)>& child) {
  const std::string dir = make_temp_dir();
  EXPECT_FALSE(dir.empty());
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 99;
      try {
        auto store = std::make_shared<DirStore>(dir);
        store->set_timeout(milliseconds(10000));
        code = child(r, store);
      } catch (const std::exception& e) {
        std::cerr << "rank " << r << ": " << e.what() << std::endl;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(size, -1);
  std::vector<bool> done(size, false);
  const auto until = Clock::now() + deadline;
  int remaining = size;
  while (remaining > 0 && Clock::now() < until) {
    for (int r = 0; r < size; ++r) {
      if (done[r]) continue;
      int s = 0;
      if (::waitpid(pids[r], &s, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        status[r] = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
        if (WIFSIGNALED(s)) ADD_FAILURE() << "rank " << r << " was killed by signal " << WTERMSIG(s);
      }
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (int r = 0; r < size; ++r) {
    if (done[r]) continue;
    ADD_FAILURE() << "rank " << r << " did not finish within " << deadline.count()
                  << " ms; killed";
    ::kill(pids[r], SIGKILL);
    ::waitpid(pids[r], nullptr, 0);
  }
  if (std::system(("rm -rf " + dir).c_str()) != 0) ADD_FAILURE() << "could not remove " << dir;
  return status;
}

ProcessGroupGlooOptions options(milliseconds timeout, int threads = 2) {
  ProcessGroupGlooOptions o;
  o.timeout = timeout;
  o.threads = threads;
  return o;
}

#define CHILD_CHECK(cond)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::cerr << "rank " << rank << ": check failed: " #cond << std::endl;    \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

TEST(ProcessGroupGlooMultiprocess, CollectivesAcrossProcesses) {
  for (int size : {2, 4}) {
    const auto status = run_processes(size, milliseconds(30000), [size](int rank, std::shared_ptr<Store> store) {
      ProcessGroupGloo pg(store, rank, size, options(milliseconds(10000)));
      Tensor t = full({100000}, static_cast<double>(rank + 1), kFloat32);
      pg.all_reduce(t)->wait();
      const float sum = size * (size + 1) / 2.0f;
      CHILD_CHECK(t.data_ptr<float>()[0] == sum && t.data_ptr<float>()[99999] == sum);

      Tensor b = full({3}, static_cast<double>(rank), kInt64);
      pg.broadcast(b, size - 1)->wait();
      CHILD_CHECK(b.to_vector<int64_t>() == std::vector<int64_t>(3, size - 1));

      Tensor gathered = zeros({size, 2}, kFloat64);
      pg.all_gather_into_tensor(gathered, full({2}, rank * 10.0, kFloat64))->wait();
      for (int r = 0; r < size; ++r) CHILD_CHECK(gathered.select(0, r).to_vector<double>()[1] == r * 10.0);

      Tensor in = zeros({4}, kInt32);
      auto s = pg.send(full({4}, static_cast<double>(rank), kInt32), (rank + 1) % size, 1);
      pg.recv(in, (rank + size - 1) % size, 1)->wait();
      s->wait();
      CHILD_CHECK(in.to_vector<int32_t>()[3] == (rank + size - 1) % size);
      pg.barrier()->wait();
      return 0;
    });
    for (int r = 0; r < size; ++r) EXPECT_EQ(status[r], 0) << "rank " << r << " of " << size;
  }
}

// Rank 1 dies before an all_reduce: rank 0 must fail promptly (well within
// its 20 s timeout) with a loom::Error naming the collective and its rank,
// and later collectives must fail fast.
TEST(ProcessGroupGlooMultiprocess, DeadPeerFailsPromptlyNotHang) {
  const auto status = run_processes(2, milliseconds(30000), [](int rank, std::shared_ptr<Store> store) {
    ProcessGroupGloo pg(store, rank, 2, options(milliseconds(20000)));
    Tensor warm = full({10}, 1.0, kFloat32);
    pg.all_reduce(warm)->wait();
    if (rank == 1) ::_exit(0);  // dies without a goodbye
    Tensor t = zeros({1 << 20}, kFloat32);
    const auto start = Clock::now();
    try {
      pg.all_reduce(t)->wait();
      std::cerr << "rank 0: all_reduce succeeded without its peer" << std::endl;
      return 1;
    } catch (const Error& e) {
      const std::string message = e.what();
      std::cerr << "rank 0 got (as expected): " << message << std::endl;
      CHILD_CHECK(message.find("all_reduce (sum) of 1048576 float32 on rank 0 of 2") !=
                  std::string::npos);
      CHILD_CHECK(message.find("lost the connection") != std::string::npos);
    }
    CHILD_CHECK(Clock::now() - start < milliseconds(5000));
    try {
      pg.broadcast(t, 0)->wait();
      return 1;
    } catch (const Error& e) {
      CHILD_CHECK(std::string(e.what()).find("broken") != std::string::npos);
    }
    return 0;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

// A rank killed in the middle of a large all_reduce: the survivors fail
// with a loom::Error rather than hang.  Usually both see the lost
// connection at once; now and then (about 1 run in 15) gloo 0.5 does not
// wake one survivor's pending operation and it reports the timeout instead,
// so the bound here is the timeout, not "at once".
TEST(ProcessGroupGlooMultiprocess, PeerKilledMidCollective) {
  const auto status = run_processes(3, milliseconds(30000), [](int rank, std::shared_ptr<Store> store) {
    ProcessGroupGloo pg(store, rank, 3, options(milliseconds(6000), 1));
    Tensor t = full({8 << 20}, 1.0, kFloat32);  // 32 MiB: takes a while
    if (rank == 2) {
      std::thread([] {
        std::this_thread::sleep_for(milliseconds(30));
        ::_exit(7);
      }).detach();
    }
    const auto start = Clock::now();
    try {
      for (int i = 0; i < 50; ++i) pg.all_reduce(t)->wait();
      return rank == 2 ? 7 : 1;  // survivors must not finish 50 rounds without rank 2
    } catch (const Error& e) {
      std::cerr << "rank " << rank << " got (as expected): " << e.what() << std::endl;
      CHILD_CHECK(std::string(e.what()).find("all_reduce") != std::string::npos);
    }
    CHILD_CHECK(Clock::now() - start < milliseconds(9000));
    return 0;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
  EXPECT_EQ(status[2], 7);
}

}  // namespace
}  // namespace distributed
}  // namespace loom
