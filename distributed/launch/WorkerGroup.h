// WorkerGroup: loomrun's supervisor.  Starts one process per worker with
// fork + execvp, copies their output line by line with a rank prefix, and
// decides when the job is over.
//
//   - every worker exits 0                 -> exit code 0
//   - a worker exits non-zero or is killed -> the others get SIGTERM, SIGKILL
//     after grace_period; the exit code is that worker's (128 + signal for a
//     signal).  The first failure wins; workers stopped afterwards do not count.
//   - loomrun gets SIGINT/SIGTERM/SIGHUP   -> the signal is forwarded to every
//     worker, SIGKILL follows after grace_period (at once on a second
//     signal); exit code 128 + signal
//   - timeout passes                       -> stopped as above; exit code 124
//   - a program cannot be executed         -> the started workers are stopped;
//     exit code 127 (not found) or 126 (found but not executable)
//
// Each worker runs in its own session and process group (setsid): signals go
// to the group, so whatever a worker started is stopped with it; a Ctrl-C at
// the terminal reaches loomrun alone, which forwards it once; and a worker
// reading the terminal is not stopped as a background job would be.  A
// worker gets SIGKILL from the kernel should loomrun itself die
// (PR_SET_PDEATHSIG), so no worker outlives its launcher.  loomrun's stdin is
// inherited; stdout and stderr go through pipes to LinePrefixers writing to
// loomrun's stdout and stderr.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/launch/LinePrefixer.h"

namespace loom {
namespace distributed {

struct WorkerSpec {
  int rank = 0;
  int local_rank = 0;
  // Program and arguments; the program is looked up in PATH (execvp).
  std::vector<std::string> command;
  // Set on top of loomrun's environment.
  std::vector<std::pair<std::string, std::string>> env;
};

struct WorkerGroupOptions {
  std::chrono::milliseconds monitor_interval{100};
  std::chrono::milliseconds grace_period{5000};
  std::chrono::milliseconds timeout{0};  // 0: none
  int stdout_fd = 1;  // where prefixed stdout lines go
  int stderr_fd = 2;  // where prefixed stderr lines and loomrun's reports go
};

class WorkerGroup {
 public:
  WorkerGroup(std::vector<WorkerSpec> workers, WorkerGroupOptions options);
  // Kills (SIGKILL) and reaps workers still running, e.g. after an exception.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts the workers and supervises them until the job is over (see above);
  // returns the exit code for loomrun.  Installs handlers for SIGINT,
  // SIGTERM, SIGHUP and SIGCHLD (and ignores SIGPIPE) while it runs, so call
  // it from the main thread of a process that runs nothing else.  Throws
  // loom::Error when pipes or fork fail.
  int run();

 private:
  struct Worker {
    WorkerSpec spec;
    pid_t pid = -1;
    bool running = false;
    int status = 0;
    int out_fd = -1, err_fd = -1;  // read ends of the worker's stdout/stderr pipes
    std::unique_ptr<LinePrefixer> out, err;
  };

  // Returns 0, or the exit code when a program cannot be executed.
  int start();
  // Returns 0, or errno when the program cannot be executed (the child then
  // exits 127 and is reaped as usual).
  int start_one(Worker& worker);
  // Reads what is available from the worker's pipes; closes them at EOF.
  void pump(Worker& worker, bool out);
  void reap();
  void signal_all(int sig);
  void begin_stop(int sig);
  void drain_output(std::chrono::milliseconds limit);
  void report(const std::string& line);
  std::string who(const Worker& worker) const;

  std::vector<Worker> workers_;
  WorkerGroupOptions options_;
  bool stopping_ = false;
  bool killed_ = false;
  std::chrono::steady_clock::time_point kill_at_;
  int failed_ = -1;         // index of the first failed worker
  int signal_received_ = 0;  // first signal that stopped the job
  bool timed_out_ = false;
};

}  // namespace distributed
}  // namespace loom
