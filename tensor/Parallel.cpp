#include "tensor/Parallel.h"

#include <atomic>
#include <cstdlib>
#include <thread>

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

}  // namespace

void set_num_threads(int n) {
  LOOM_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  g_num_threads = n;
}

int get_num_threads() { return t_num_threads > 0 ? t_num_threads : g_num_threads.load(); }

void set_thread_num_threads(int n) {
  LOOM_CHECK(n >= 0, "set_thread_num_threads: expected >= 0, got ", n);
  t_num_threads = n;
}

}  // namespace loom
