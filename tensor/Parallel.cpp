#include "tensor/Parallel.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include <pthread.h>

#include "tensor/Error.h"

namespace loom {
namespace {

int initial_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

std::atomic<int> g_num_threads{initial_threads()};
thread_local int t_num_threads = 0;
std::atomic<bool> g_forked_after_parallel_region{false};

void on_fork_child() {
  if (detail::g_parallel_region_started.load()) g_forked_after_parallel_region = true;
}

const bool g_atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, on_fork_child);
  return true;
}();

}  // namespace

void set_num_threads(int n) {
  LOOM_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  g_num_threads = n;
}

int get_num_threads() {
  if (g_forked_after_parallel_region.load(std::memory_order_relaxed)) return 1;
  return t_num_threads > 0 ? t_num_threads : g_num_threads.load();
}

bool forked_after_parallel_region() {
  (void)g_atfork_registered;
  return g_forked_after_parallel_region.load();
}

void set_thread_num_threads(int n) {
  LOOM_CHECK(n >= 0, "set_thread_num_threads: expected >= 0, got ", n);
  t_num_threads = n;
}

}  // namespace loom
