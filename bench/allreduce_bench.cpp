// All-reduce (sum, float32) bus bandwidth of loom's gloo process group on
// loopback, one line per size; the twin of bench/allreduce_bench.py.
//
//   bazel-bin/distributed/launch/loomrun --nproc_per_node 2 bazel-bin/bench/allreduce_bench
//   bench/compare_allreduce.sh      (both, side by side, with ratios)
//
// Method (same on both sides): for each size, 3 warm-up calls, then `rounds`
// timed rounds of `iters` back-to-back blocking all-reduces after a barrier;
// the best round's mean per call, the slowest rank's.  Bus bandwidth =
// bytes / time * 2 (n - 1) / n, the bytes each link carries in a ring.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>

#include "distributed/DefaultGroup.h"
#include "loom.h"

using namespace loom;
namespace dist = loom::distributed;

int main(int argc, char** argv) {
  CLI::App app{"loom gloo all-reduce bandwidth"};
  int64_t min_bytes = 4 << 10, max_bytes = 64 << 20;
  int rounds = 3;
  bool check_consistency = true;
  int64_t small_message_bytes = dist::InitOptions().gloo.small_message_bytes;
  app.add_option("--min-bytes", min_bytes)->capture_default_str();
  app.add_option("--max-bytes", max_bytes)->capture_default_str();
  app.add_option("--rounds", rounds)->capture_default_str();
  app.add_option("--check-consistency", check_consistency,
                 "Exchange a description of each collective first (ProcessGroupGlooOptions)")
      ->capture_default_str();
  app.add_option("--small-message-bytes", small_message_bytes,
                 "All-reduces up to this size take one all-gather round (ProcessGroupGlooOptions)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  set_num_threads(1);
  try {
    dist::InitOptions init;
    init.timeout = std::chrono::minutes(5);
    init.gloo.check_consistency = check_consistency;
    init.gloo.small_message_bytes = static_cast<size_t>(small_message_bytes);
    dist::init_process_group("gloo", init);
    const int world = dist::get_world_size();
    for (int64_t nbytes = min_bytes; nbytes <= max_bytes; nbytes *= 4) {
      Tensor t = ones({nbytes / 4});
      const int64_t iters = std::max<int64_t>(5, std::min<int64_t>(500, (int64_t(256) << 20) / nbytes));
      for (int i = 0; i < 3; ++i) dist::all_reduce(t);
      double best = std::numeric_limits<double>::infinity();
      for (int r = 0; r < rounds; ++r) {
        dist::barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < iters; ++i) dist::all_reduce(t);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
      }
      Tensor slowest = full({1}, best, kFloat64);
      dist::all_reduce(slowest, dist::ReduceOp::Max);
      const double seconds = slowest.item();
      const double busbw = nbytes / seconds * 2.0 * (world - 1) / world / 1e9;
      if (dist::get_rank() == 0) {
        std::printf("loom allreduce ranks=%d bytes=%lld us=%.1f busbw_GBps=%.3f\n", world,
                    static_cast<long long>(nbytes), seconds * 1e6, busbw);
        std::fflush(stdout);
      }
    }
    dist::destroy_process_group();
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
