// Scoped OpenMP thread count for calls into libraries that size their own
// parallel regions by omp_get_max_threads() (oneDNN's sgemm and convolutions).
#pragma once

#include <omp.h>

namespace loom {
namespace cpu {

// Sets the calling thread's OpenMP thread count to n for the scope, then
// restores it.  Per thread: other threads (CPU logical devices) are untouched.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()), changed_(n != saved_) {
    if (changed_) omp_set_num_threads(n);
  }
  ~OmpThreads() {
    if (changed_) omp_set_num_threads(saved_);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  const int saved_;
  const bool changed_;
};

}  // namespace cpu
}  // namespace loom
