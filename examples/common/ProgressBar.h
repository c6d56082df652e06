// A training progress display: on a terminal, one line redrawn in place
//   epoch 1/2 [=========>          ] 31/63  loss 0.4213  5234 img/s  ETA 3s
// and, when stdout is not a terminal (logs, CI), a plain line every
// `log_every` steps and at the end of the epoch.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace loom {
namespace examples {

class ProgressBar {
 public:
  ProgressBar(int64_t epoch, int64_t epochs, int64_t steps, int64_t log_every = 20);
  // After step `step` (1-based) with `images` images in that step.
  void update(int64_t step, double loss, int64_t images);
  // Ends the line; returns seconds since construction.
  double finish();

 private:
  using Clock = std::chrono::steady_clock;
  int64_t epoch_, epochs_, steps_, log_every_;
  bool tty_;
  Clock::time_point start_;
  int64_t images_ = 0;
};

// "1m 23.4s" / "12.3s".
std::string format_duration(double seconds);

// Resolves a path given on the command line: relative paths are relative to
// the directory `bazel run` was started from (BUILD_WORKING_DIRECTORY).
std::string user_path(const std::string& path);
// The workspace root under `bazel run` (BUILD_WORKSPACE_DIRECTORY), else ".".
std::string workspace_root();

}  // namespace examples
}  // namespace loom
