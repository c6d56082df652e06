#include "examples/common/ProgressBar.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace loom {
namespace examples {

ProgressBar::ProgressBar(int64_t epoch, int64_t epochs, int64_t steps, int64_t log_every)
    : epoch_(epoch), epochs_(epochs), steps_(steps), log_every_(log_every),
      tty_(::isatty(STDOUT_FILENO) == 1), start_(Clock::now()) {}

void ProgressBar::update(int64_t step, double loss, int64_t images) {
  images_ += images;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed > 0 ? images_ / elapsed : 0;
  const double eta = step > 0 ? elapsed / step * (steps_ - step) : 0;
  if (tty_) {
    constexpr int kWidth = 24;
    const int filled = steps_ > 0 ? static_cast<int>(kWidth * step / steps_) : kWidth;
    std::string bar(filled, '=');
    if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
    std::printf("\repoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f img/s  ETA %s   ",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), loss, rate,
                format_duration(eta).c_str());
    std::fflush(stdout);
  } else if (step % log_every_ == 0 || step == steps_) {
    std::printf("epoch %lld/%lld step %lld/%lld  loss %.4f  %.0f img/s  ETA %s\n",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_),
                static_cast<long long>(step), static_cast<long long>(steps_), loss, rate,
                format_duration(eta).c_str());
    std::fflush(stdout);
  }
}

double ProgressBar::finish() {
  if (tty_) std::printf("\n");
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

std::string format_duration(double seconds) {
  char buf[64];
  if (seconds >= 60) {
    std::snprintf(buf, sizeof buf, "%dm %.1fs", static_cast<int>(seconds / 60),
                  seconds - 60 * static_cast<int>(seconds / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  }
  return buf;
}

std::string user_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  return cwd ? std::string(cwd) + "/" + path : path;
}

std::string workspace_root() {
  const char* root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  return root ? root : ".";
}

}  // namespace examples
}  // namespace loom
