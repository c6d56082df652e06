// Time to draw ResNet-50's 25.6M initial weights' worth of normal values:
// the Generator's serial sequence (tensors below the counter-based
// threshold, 400 of 64,000 elements) against one counter-based fill
// (tensor/native/CounterRandom.h) on 1 and on --threads threads, and the
// whole resnet50() constructor.  bazel run -c opt //bench:randn_bench
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "loom.h"

using namespace loom;

namespace {
template <typename Fn>
double best_ms(const Fn& fn) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"randn: serial vs counter-based"};
  int threads = 2;
  app.add_option("--threads", threads)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  constexpr int64_t kChunk = 64000, kChunks = 400;
  set_num_threads(1);
  const double serial = best_ms([] {
    for (int64_t i = 0; i < kChunks; ++i) (void)randn({kChunk});
  });
  const double counter1 = best_ms([] { (void)randn({kChunk * kChunks}); });
  set_num_threads(threads);
  const double counter_t = best_ms([] { (void)randn({kChunk * kChunks}); });
  const double model = best_ms([] { (void)nn::models::resnet50(1000); });
  std::printf(
      "randn 25.6M values: serial generator %.1f ms, counter-based 1 thread %.1f ms, "
      "%d threads %.1f ms; resnet50() constructor %.1f ms (%d threads)\n",
      serial, counter1, threads, counter_t, model, threads);
  return 0;
}
