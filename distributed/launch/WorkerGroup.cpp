#include "distributed/launch/WorkerGroup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "distributed/launch/ExitStatus.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace {

using Clock = std::chrono::steady_clock;

// The self-pipe the signal handler writes signal numbers to, so the
// supervision loop's poll() wakes for signals and child exits alike.
int g_signal_pipe[2] = {-1, -1};

extern "C" void note_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

// Installs note_signal for kHandled and ignores SIGPIPE while alive.
class SignalScope {
 public:
  SignalScope() {
    LOOM_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0,
               "loomrun: pipe failed: ", std::strerror(errno));
    struct sigaction action {};
    action.sa_handler = note_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kHandled); ++i) ::sigaction(kHandled[i], &action, &saved_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &saved_pipe_);
  }
  ~SignalScope() {
    for (size_t i = 0; i < std::size(kHandled); ++i) ::sigaction(kHandled[i], &saved_[i], nullptr);
    ::sigaction(SIGPIPE, &saved_pipe_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }

 private:
  struct sigaction saved_[std::size(kHandled)];
  struct sigaction saved_pipe_;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int ms_until(Clock::time_point when, Clock::time_point now) {
  if (when <= now) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(when - now).count() + 1;
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

}  // namespace

WorkerGroup::WorkerGroup(std::vector<WorkerSpec> workers, WorkerGroupOptions options)
    : options_(options) {
  LOOM_CHECK(!workers.empty(), "WorkerGroup: no workers");
  for (auto& spec : workers) {
    LOOM_CHECK(!spec.command.empty(), "WorkerGroup: rank ", spec.rank, " has no command");
    Worker worker;
    worker.spec = std::move(spec);
    workers_.push_back(std::move(worker));
  }
}

WorkerGroup::~WorkerGroup() {
  for (Worker& w : workers_) {
    if (w.running) {
      ::kill(-w.pid, SIGKILL);
      ::kill(w.pid, SIGKILL);
      while (::waitpid(w.pid, &w.status, 0) < 0 && errno == EINTR) {
      }
      w.running = false;
    }
    close_fd(w.out_fd);
    close_fd(w.err_fd);
  }
}

std::string WorkerGroup::who(const Worker& w) const {
  return "rank " + std::to_string(w.spec.rank) + " (local_rank " +
         std::to_string(w.spec.local_rank) + ", pid " + std::to_string(w.pid) + ")";
}

void WorkerGroup::report(const std::string& text) {
  const std::string line = "loomrun: " + text + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(options_.stderr_fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

int WorkerGroup::start_one(Worker& w) {
  int out[2], err[2], exec_err[2];
  LOOM_CHECK(::pipe2(out, O_CLOEXEC) == 0, "loomrun: pipe failed: ", std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(exec_err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    LOOM_FAIL("loomrun: pipe failed: ", std::strerror(e));
  }
  // argv and the environment are built before the fork: the child only copies.
  std::vector<char*> argv;
  for (auto& arg : w.spec.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kHandled) sigaddset(&block, sig);
  ::sigprocmask(SIG_BLOCK, &block, &old);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : kHandled) ::sigaction(sig, &dfl, nullptr);
    ::sigaction(SIGPIPE, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::setsid();  // its own session and process group, no controlling terminal
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    for (const auto& [name, value] : w.spec.env) ::setenv(name.c_str(), value.c_str(), 1);
    ::execvp(argv[0], argv.data());
    const int e = errno;
    (void)!::write(exec_err[1], &e, sizeof e);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ::close(out[1]);
  ::close(err[1]);
  ::close(exec_err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    ::close(exec_err[0]);
    LOOM_FAIL("loomrun: fork failed for rank ", w.spec.rank, ": ", std::strerror(fork_errno));
  }
  w.pid = pid;
  w.running = true;
  w.out_fd = out[0];
  w.err_fd = err[0];
  ::fcntl(w.out_fd, F_SETFL, ::fcntl(w.out_fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(w.err_fd, F_SETFL, ::fcntl(w.err_fd, F_GETFL) | O_NONBLOCK);
  const std::string prefix = "[rank" + std::to_string(w.spec.rank) + "]: ";
  w.out = std::make_unique<LinePrefixer>(prefix, options_.stdout_fd);
  w.err = std::make_unique<LinePrefixer>(prefix, options_.stderr_fd);

  // The exec-error pipe closes on a successful exec; otherwise it carries errno.
  int exec_errno = 0;
  ssize_t n;
  do n = ::read(exec_err[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  ::close(exec_err[0]);
  return n == static_cast<ssize_t>(sizeof exec_errno) ? exec_errno : 0;
}

int WorkerGroup::start() {
  for (Worker& w : workers_) {
    const int exec_errno = start_one(w);
    if (exec_errno != 0) {
      report("cannot execute '" + w.spec.command[0] + "' for rank " + std::to_string(w.spec.rank) +
             ": " + std::strerror(exec_errno));
      return exec_errno == ENOENT ? 127 : 126;  // as a shell does
    }
  }
  return 0;
}

void WorkerGroup::pump(Worker& w, bool out) {
  int& fd = out ? w.out_fd : w.err_fd;
  LinePrefixer& prefixer = out ? *w.out : *w.err;
  char buf[65536];
  // A bounded number of reads per wake-up, so one chatty worker cannot
  // starve the others or the supervision.
  for (int round = 0; round < 16 && fd >= 0; ++round) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      prefixer.feed(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    prefixer.flush();  // EOF: the last line may lack its newline
    close_fd(fd);
  }
}

// To the worker's process group; to the worker alone while it has not yet
// made its group (just forked) or when it has left it.
void WorkerGroup::signal_all(int sig) {
  for (Worker& w : workers_)
    if (w.running && ::kill(-w.pid, sig) != 0) ::kill(w.pid, sig);
}

void WorkerGroup::begin_stop(int sig) {
  stopping_ = true;
  kill_at_ = Clock::now() + options_.grace_period;
  signal_all(sig);
}

void WorkerGroup::reap() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.running) continue;
    int status = 0;
    pid_t got;
    do got = ::waitpid(w.pid, &status, WNOHANG);
    while (got < 0 && errno == EINTR);
    if (got == 0) continue;
    w.running = false;
    w.status = got == w.pid ? status : (255 << 8);
    const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
    if (!ok && !stopping_) {
      failed_ = static_cast<int>(i);
      report(who(w) + " " + describe_exit_status(w.status) + "; stopping the other workers");
      begin_stop(SIGTERM);
    }
  }
}

void WorkerGroup::drain_output(std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, bool>> owners;
    for (Worker& w : workers_) {
      if (w.out_fd >= 0) fds.push_back({w.out_fd, POLLIN, 0}), owners.emplace_back(&w, true);
      if (w.err_fd >= 0) fds.push_back({w.err_fd, POLLIN, 0}), owners.emplace_back(&w, false);
    }
    const auto now = Clock::now();
    if (fds.empty() || now >= until) break;
    if (::poll(fds.data(), fds.size(), ms_until(until, now)) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) pump(*owners[i].first, owners[i].second);
  }
  // Whatever a left-over grandchild still holds open is not waited for.
  for (Worker& w : workers_) {
    if (w.out) w.out->flush();
    if (w.err) w.err->flush();
    close_fd(w.out_fd);
    close_fd(w.err_fd);
  }
}

int WorkerGroup::run() {
  SignalScope signals;
  const auto started = Clock::now();
  const auto timeout_at =
      options_.timeout.count() > 0 ? started + options_.timeout : Clock::time_point::max();
  const int exec_failure = start();
  if (exec_failure != 0) begin_stop(SIGTERM);

  while (true) {
    bool any_running = false;
    for (const Worker& w : workers_) any_running = any_running || w.running;
    if (!any_running) break;

    auto now = Clock::now();
    auto wake = now + options_.monitor_interval;
    if (stopping_ && !killed_) wake = std::min(wake, kill_at_);
    if (!stopping_) wake = std::min(wake, timeout_at);
    std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<Worker*, bool>> owners{{nullptr, false}};
    for (Worker& w : workers_) {
      if (w.out_fd >= 0) fds.push_back({w.out_fd, POLLIN, 0}), owners.emplace_back(&w, true);
      if (w.err_fd >= 0) fds.push_back({w.err_fd, POLLIN, 0}), owners.emplace_back(&w, false);
    }
    const int ready = ::poll(fds.data(), fds.size(), ms_until(wake, now));
    if (ready > 0) {
      if (fds[0].revents) {
        unsigned char sigs[64];
        ssize_t n;
        while ((n = ::read(g_signal_pipe[0], sigs, sizeof sigs)) > 0) {
          for (ssize_t k = 0; k < n; ++k) {
            const int sig = sigs[k];
            if (sig == SIGCHLD) continue;
            if (!stopping_) {
              signal_received_ = sig;
              report("received " + describe_signal(sig) + "; forwarding it to the workers");
              begin_stop(sig);
            } else if (!killed_) {
              report("received " + describe_signal(sig) + " while stopping; killing the workers");
              signal_all(SIGKILL);
              killed_ = true;
            }
          }
        }
      }
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents) pump(*owners[i].first, owners[i].second);
    }
    reap();
    now = Clock::now();
    if (!stopping_ && now >= timeout_at) {
      timed_out_ = true;
      report("timeout of " + detail::str(options_.timeout.count() / 1000.0) +
             " s reached; stopping the workers");
      begin_stop(SIGTERM);
    }
    if (stopping_ && !killed_ && now >= kill_at_) {
      for (const Worker& w : workers_)
        if (w.running)
          report(who(w) + " is still running " + detail::str(options_.grace_period.count() / 1000.0) +
                 " s after being asked to stop; sending SIGKILL");
      signal_all(SIGKILL);
      killed_ = true;
    }
  }
  drain_output(std::chrono::milliseconds(500));

  if (exec_failure != 0) return exec_failure;
  if (failed_ >= 0) {
    const Worker& w = workers_[failed_];
    const int code = shell_exit_code(w.status);
    report("exiting with code " + std::to_string(code) + ": " + who(w) + " " +
           describe_exit_status(w.status));
    return code;
  }
  if (signal_received_ != 0) return 128 + signal_received_;
  if (timed_out_) return 124;
  return 0;
}

}  // namespace distributed
}  // namespace loom
