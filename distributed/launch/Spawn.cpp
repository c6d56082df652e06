#include "distributed/launch/Spawn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "distributed/launch/ExitStatus.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Longest error message a child passes back (well under a pipe's buffer, so
// the child never blocks writing it).
constexpr size_t kMaxMessage = 16 * 1024;

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// The child's side: environment, fn(rank), report, _exit.  Never returns.
[[noreturn]] void run_child(const std::function<void(int)>& fn, int rank, int nprocs,
                            const std::string& addr, int port, int error_fd) {
  int code = 0;
  std::string message;
  try {
    ::setenv("MASTER_ADDR", addr.c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
    ::setenv("GROUP_RANK", "0", 1);
    fn(rank);
  } catch (const std::exception& e) {
    code = 1;
    message = e.what();
  } catch (...) {
    code = 1;
    message = "unknown exception (not derived from std::exception)";
  }
  try {
    std::cout.flush();
    std::cerr.flush();
  } catch (...) {
  }
  std::fflush(nullptr);
  if (code != 0) {
    const std::string line = "[rank" + std::to_string(rank) + "]: " + message + "\n";
    write_all(STDERR_FILENO, line.data(), line.size());
    write_all(error_fd, message.data(), std::min(message.size(), kMaxMessage));
  }
  ::_exit(code);
}

}  // namespace

int find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  LOOM_CHECK(fd >= 0, "find_free_port: socket failed: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int saved = errno;
  ::close(fd);
  LOOM_CHECK(ok, "find_free_port: could not bind a TCP socket to port 0: ", std::strerror(saved));
  return ntohs(addr.sin_port);
}

pid_t SpawnContext::pid(int rank) const {
  LOOM_CHECK(rank >= 0 && rank < nprocs(), "SpawnContext::pid: rank should be in [0, ", nprocs(),
             "), got ", rank);
  return children_[rank].pid;
}

void SpawnContext::read_message(Child& child) {
  if (child.error_fd < 0) return;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(child.error_fd, buf, sizeof buf);
    if (n > 0) {
      if (child.message.size() < kMaxMessage) child.message.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // still open: the child is alive
    break;                                  // EOF or error
  }
  ::close(child.error_fd);
  child.error_fd = -1;
}

int SpawnContext::reap() {
  int failed = -1;
  for (int rank = 0; rank < nprocs(); ++rank) {
    Child& child = children_[rank];
    if (!child.running) continue;
    int status = 0;
    pid_t got;
    do got = ::waitpid(child.pid, &status, WNOHANG);
    while (got < 0 && errno == EINTR);
    if (got == 0) continue;
    child.running = false;
    // got < 0 (ECHILD): reaped elsewhere (a SIGCHLD handler, waitpid(-1)); its
    // status is lost, count it as a failure rather than wait forever.
    child.status = got == child.pid ? status : (255 << 8);
    read_message(child);
    if (failed < 0 && !(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)) failed = rank;
  }
  return failed;
}

void SpawnContext::terminate() {
  for (Child& child : children_)
    if (child.running) ::kill(child.pid, SIGTERM);
  const auto kill_at = Clock::now() + grace_period_;
  while (true) {
    reap();
    bool any = false;
    for (const Child& child : children_) any = any || child.running;
    if (!any) break;
    if (Clock::now() >= kill_at) {
      for (Child& child : children_) {
        if (!child.running) continue;
        ::kill(child.pid, SIGKILL);
        int status = 0;
        while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
        }
        child.running = false;
        child.status = status;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (Child& child : children_) {
    if (child.error_fd >= 0) ::close(child.error_fd);
    child.error_fd = -1;
  }
}

SpawnContext::~SpawnContext() {
  try {
    terminate();
  } catch (...) {
  }
}

bool SpawnContext::join(std::optional<std::chrono::milliseconds> wait) {
  if (!error_.empty()) throw Error(error_);
  const auto wait_until = wait ? Clock::now() + *wait : Clock::time_point::max();
  while (true) {
    const int failed = reap();
    if (failed >= 0) {
      const Child& child = children_[failed];
      error_ = "spawn: rank " + std::to_string(failed) + " " + describe_exit_status(child.status);
      if (!child.message.empty()) error_ += ": " + child.message;
      terminate();
      throw Error(error_);
    }
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    std::string late;
    int late_count = 0;
    for (int rank = 0; rank < nprocs(); ++rank) {
      if (!children_[rank].running) continue;
      late += (late_count++ ? ", " : "") + std::to_string(rank);
      if (children_[rank].error_fd >= 0) {
        fds.push_back({children_[rank].error_fd, POLLIN, 0});
        ranks.push_back(rank);
      }
    }
    if (late_count == 0) return true;
    const auto now = Clock::now();
    if (now >= deadline_) {
      error_ = "spawn: timed out after " + std::to_string(timeout_.count()) + " ms: " +
               (late_count == 1 ? "rank " + late + " was" : "ranks " + late + " were") +
               " still running and " + (late_count == 1 ? "was" : "were") + " killed";
      terminate();
      throw Error(error_);
    }
    if (now >= wait_until) return false;
    // Wake when a child writes its message or exits (its pipe closes), or
    // within 100 ms to notice children that exit otherwise.  A child whose
    // pipe has closed is exiting: waitpid sees it a moment later.
    const auto tick = std::chrono::milliseconds(static_cast<int>(fds.size()) < late_count ? 2 : 100);
    const auto until = std::min({deadline_, wait_until, now + tick});
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(1, ms)));
    if (ready > 0)
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents) read_message(children_[ranks[i]]);
  }
}

std::unique_ptr<SpawnContext> spawn(const std::function<void(int rank)>& fn, int nprocs,
                                    SpawnOptions options) {
  LOOM_CHECK(fn != nullptr, "spawn: fn is empty");
  LOOM_CHECK(nprocs >= 1, "spawn: nprocs must be >= 1, got ", nprocs);
  LOOM_CHECK(options.master_port >= 0 && options.master_port <= 65535,
             "spawn: master_port must be in [0, 65535] (0: pick a free port), got ",
             options.master_port);
  LOOM_CHECK(options.timeout.count() >= 0, "spawn: timeout must be >= 0 ms (0: none), got ",
             options.timeout.count());
  LOOM_CHECK(options.grace_period.count() >= 0, "spawn: grace_period must be >= 0 ms, got ",
             options.grace_period.count());
  LOOM_CHECK(!options.master_addr.empty(), "spawn: master_addr is empty");

  std::unique_ptr<SpawnContext> context(new SpawnContext());
  context->master_addr_ = options.master_addr;
  context->master_port_ = options.master_port ? options.master_port : find_free_port();
  context->timeout_ = options.timeout;
  context->grace_period_ = options.grace_period;
  context->deadline_ = options.timeout.count() > 0 ? Clock::now() + options.timeout
                                                   : Clock::time_point::max();

  // Flush what the parent buffered, or every child prints it again.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  for (int rank = 0; rank < nprocs; ++rank) {
    int fds[2];
    LOOM_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "spawn: pipe failed: ", std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      for (const auto& other : context->children_)
        if (other.error_fd >= 0) ::close(other.error_fd);
      // While spawn blocks in join, the forking thread outlives the children:
      // let the kernel kill them should the parent die without cleaning up.
      if (options.join) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
      }
      run_child(fn, rank, nprocs, context->master_addr_, context->master_port_, fds[1]);
    }
    const int saved = errno;
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      context->terminate();
      LOOM_FAIL("spawn: fork failed for rank ", rank, " of ", nprocs, ": ", std::strerror(saved));
    }
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    SpawnContext::Child child;
    child.pid = pid;
    child.error_fd = fds[0];
    context->children_.push_back(child);
  }
  if (options.join) context->join();
  return context;
}

}  // namespace distributed
}  // namespace loom
