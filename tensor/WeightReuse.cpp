#include "tensor/WeightReuse.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace loom {
namespace {

std::atomic<int64_t> g_reused{0}, g_made{0};

struct Preparers {
  std::mutex mutex;
  std::vector<int (*)(Device)> all;
};

Preparers& preparers() {
  static Preparers* p = new Preparers;  // never destroyed: kernels register at start-up
  return *p;
}

}  // namespace

int prepare_kept_weights(Device device) {
  std::vector<int (*)(Device)> all;
  {
    std::lock_guard<std::mutex> lock(preparers().mutex);
    all = preparers().all;
  }
  int made = 0;
  for (auto prepare : all) made += prepare(device);
  return made;
}

WeightReuseStats weight_reuse_stats() { return {g_reused.load(), g_made.load()}; }

namespace detail {
void count_weight_reuse(bool reused) { ++(reused ? g_reused : g_made); }

void register_kept_weight_preparer(int (*prepare)(Device)) {
  std::lock_guard<std::mutex> lock(preparers().mutex);
  preparers().all.push_back(prepare);
}
}  // namespace detail

}  // namespace loom
