// Intra-op parallelism: parallel_for over index ranges, and the thread count.
//
// Built on OpenMP.  The thread count is a process-wide default
// (set_num_threads) that a thread may override for itself (a CPU logical
// device's worker uses its share of the cores).
//
// Fork safety: libgomp's thread pool does not survive fork(); a child that
// enters a parallel region after its parent did would hang.  So in a process
// forked after the parent ran a parallel region (distributed::spawn, tests),
// get_num_threads() is 1 and parallel_for runs inline.  Processes started by
// exec (loomrun) are unaffected.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

#include <omp.h>

namespace loom {

// Process-wide default number of intra-op threads (initially the core count,
// or OMP_NUM_THREADS).
void set_num_threads(int n);
int get_num_threads();
// True in a process forked after its parent had started OpenMP threads.
bool forked_after_parallel_region();

namespace detail {
// Set once this process enters its first OpenMP parallel region.
inline std::atomic<bool> g_parallel_region_started{false};
}  // namespace detail
// Overrides the thread count for the calling thread only (0 clears it).
void set_thread_num_threads(int n);

// Runs fn(begin, end) over [begin, end) split into at most get_num_threads()
// contiguous chunks of at least `grain` indices.  Runs inline when the range
// is small or when already inside a parallel region.  An exception thrown by
// fn is rethrown on the calling thread.
template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  int64_t threads = get_num_threads();
  if (grain < 1) grain = 1;
  if (threads > (n + grain - 1) / grain) threads = (n + grain - 1) / grain;
  if (threads <= 1 || omp_in_parallel()) {
    fn(begin, end);
    return;
  }
  detail::g_parallel_region_started.store(true, std::memory_order_relaxed);
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const int64_t tid = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + tid * chunk;
    const int64_t e = b + chunk < end ? b + chunk : end;
    if (b < e) {
      try {
        fn(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

// Minimum work per thread for cheap elementwise loops.
constexpr int64_t kElementwiseGrain = 32768;

}  // namespace loom
