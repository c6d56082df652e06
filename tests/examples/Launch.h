// Running example binaries (usually under loomrun) from an end-to-end test:
// each run is a child process with stdout and stderr in files, waited for with
// a limit so that a hang fails the test instead of stalling it.  Binaries are
// found in the test's runfiles, relative to the working directory.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/PythonRef.h"

namespace loom {
namespace testing {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// The source tree (for data/mnist), found through a runfile that links to it.
inline std::string source_root() {
  char buf[PATH_MAX];
  if (!::realpath("tools/pyloom/loom_torch.py", buf)) return "";
  std::string p = buf;
  return p.substr(0, p.size() - std::string("/tools/pyloom/loom_torch.py").size());
}

// A TCP port nobody listens on right now (the kernel's pick).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  LOOM_CHECK(fd >= 0, "free_port: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  LOOM_CHECK(ok, "free_port: bind failed");
  return ntohs(addr.sin_port);
}

// One child process (a program and its arguments, with one thread per rank).
class Launch {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Launch(std::vector<std::string> args) : dir_(make_temp_dir()), start_(Clock::now()) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string out = dir_ + "/stdout", err = dir_ + "/stderr";
    pid_ = ::fork();
    LOOM_CHECK(pid_ >= 0, "Launch: fork failed");
    if (pid_ == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      ::execv(argv[0], argv.data());
      ::_exit(99);
    }
  }
  ~Launch() {
    if (status_ < 0 && pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
    }
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  // Waits up to `limit` seconds for the process to end; past it, kills it
  // and returns false.
  bool wait(double limit) {
    while (true) {
      const pid_t got = ::waitpid(pid_, &status_, WNOHANG);
      seconds_ = std::chrono::duration<double>(Clock::now() - start_).count();
      if (got == pid_) return true;
      if (seconds_ > limit) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
        timed_out_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  pid_t pid() const { return pid_; }
  std::string out() const { return read_text(dir_ + "/stdout"); }
  std::string err() const { return read_text(dir_ + "/stderr"); }
  std::string log() const {
    return std::string(timed_out_ ? "(killed: still running at the limit)\n" : "") + "stdout:\n" + out() +
           "stderr:\n" + err();
  }
  // The exit code, 128 + signal when killed by one, -1 while running.
  int exit_code() const {
    if (status_ < 0) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  // Seconds from start to the end (as seen by wait).
  double seconds() const { return seconds_; }

 private:
  std::string dir_;
  Clock::time_point start_;
  pid_t pid_ = -1;
  int status_ = -1;
  double seconds_ = 0;
  bool timed_out_ = false;
};

// Waits until `path` exists and is not empty.
inline bool wait_for_file(const std::string& path, double limit) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  while (std::chrono::steady_clock::now() < until) {
    if (::access(path.c_str(), R_OK) == 0 && !read_text(path).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace testing
}  // namespace loom
