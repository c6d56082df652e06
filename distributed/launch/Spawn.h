// distributed::spawn: run a function in nprocs forked processes, one per rank,
// as torch.multiprocessing.spawn does for the usual single-node DDP set-up.
//
//   distributed::spawn([](int rank) {
//     distributed::init_process_group("gloo");  // reads the variables below
//     ...
//   }, 4);
//
// Every child gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE (= nprocs), RANK and
// LOCAL_RANK (= its rank), LOCAL_WORLD_SIZE (= nprocs) and GROUP_RANK (= 0)
// in its environment (setenv after the fork), then runs fn(rank) and exits
// with _exit: 0 when fn returns, 1 when it throws (after printing
// "[rank<r>]: <what()>" to stderr and passing what() to the parent through a
// pipe).  The parent watches all children; when one fails (non-zero exit code
// or killed by a signal) it stops the others (SIGTERM, then SIGKILL after
// grace_period) and throws loom::Error:
//   "spawn: rank 2 failed with exit code 1: <the child's what()>"
//   "spawn: rank 0 was killed by signal 6 (Aborted)"
// Children are never left behind: the SpawnContext's destructor stops and
// reaps any still running.
//
// Fork caveats.  A child is a copy of the parent at the moment of the fork:
// it sees every object the parent had (a model built before spawn is there
// in every rank, with identical weights), but only the thread that called
// spawn exists in it.  Anything another thread held then (a lock, a half
// written buffer) stays held in the child forever, so spawn early, before
// starting threads (DataLoader workers, process groups) in the parent.
// libgomp's thread pool does not survive a fork: loom's intra-op parallel
// loops (tensor/Parallel.h) run serially in a child forked after the parent
// ran one, so for full speed do no tensor work in the parent before spawn,
// or launch separate processes with loomrun.  Output buffered in the parent
// is flushed before forking so it is not printed once per child.  Each child
// leaves with _exit, skipping the parent's atexit handlers and static
// destructors (a test framework's, for one); fn must flush or close what it
// writes (spawn flushes stdio and std::cout/cerr).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom {
namespace distributed {

struct SpawnOptions {
  // Wait for the children inside spawn (true), or return at once and let the
  // caller join() the returned context (false).
  bool join = true;
  // 0: none.  Otherwise children still running this long after the start
  // are killed and join() throws, naming the ranks that timed out.
  std::chrono::milliseconds timeout{0};
  std::string master_addr = "127.0.0.1";
  // 0: a port that is free on this machine when spawn is called.
  int master_port = 0;
  // Time the other children get between SIGTERM and SIGKILL when one fails.
  std::chrono::milliseconds grace_period{3000};
};

// The running children of one spawn call.
class SpawnContext {
 public:
  // Stops (SIGTERM, grace period, SIGKILL) and reaps every child still running.
  ~SpawnContext();
  SpawnContext(const SpawnContext&) = delete;
  SpawnContext& operator=(const SpawnContext&) = delete;

  // Waits for the children.  Returns true once all exited with code 0;
  // false when `wait` (unset: no limit) passed first, leaving them running.
  // Throws loom::Error, after stopping the others, when a child failed, or
  // when the spawn timeout passed (killing the children still running); a
  // later call throws the same error again.
  bool join(std::optional<std::chrono::milliseconds> wait = std::nullopt);
  // Sends SIGTERM to every child still running, SIGKILL after the grace
  // period, and reaps them.
  void terminate();

  int nprocs() const { return static_cast<int>(children_.size()); }
  pid_t pid(int rank) const;
  const std::string& master_addr() const { return master_addr_; }
  int master_port() const { return master_port_; }

 private:
  friend std::unique_ptr<SpawnContext> spawn(const std::function<void(int)>&, int, SpawnOptions);
  struct Child {
    pid_t pid = -1;
    int error_fd = -1;  // read end of the pipe the child writes its what() to
    bool running = true;
    int status = 0;
    std::string message;
  };
  SpawnContext() = default;
  // Reaps children that exited; returns the rank of a failed one, or -1.
  int reap();
  void read_message(Child& child);

  std::vector<Child> children_;
  std::string master_addr_;
  int master_port_ = 0;
  std::chrono::steady_clock::time_point deadline_;  // max() when no timeout
  std::chrono::milliseconds timeout_{0};
  std::chrono::milliseconds grace_period_{0};
  std::string error_;  // set once join has failed
};

// Forks nprocs children running fn(rank) for rank 0..nprocs-1 (see above).
// With options.join, waits for them and returns the finished context;
// otherwise returns at once.  Throws loom::Error for nprocs < 1, a bad port,
// when fork fails (stopping the children already started), and as join().
std::unique_ptr<SpawnContext> spawn(const std::function<void(int rank)>& fn, int nprocs,
                                    SpawnOptions options = {});

// A TCP port that nothing on this machine listens on right now (the kernel's
// choice for port 0).  Another process may take it before it is used.
int find_free_port();

}  // namespace distributed
}  // namespace loom
