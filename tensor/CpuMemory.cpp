#include "tensor/CpuMemory.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <mutex>

#include "tensor/Allocator.h"
#include "tensor/Error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define LOOM_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define LOOM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define LOOM_POISON(p, n) ((void)(p), (void)(n))
#define LOOM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace loom {
namespace cpu {
namespace {

constexpr size_t kHugePage = 2 << 20;
// Readable bytes after every segment, never handed out: vector kernels may
// load a few values past a tensor's end (and discard them), which glibc's
// heap tolerates; a block ending a segment must tolerate it too.
constexpr size_t kSlack = 4096;

// Segments straight from the kernel, 2 MiB aligned so transparent huge pages
// can back them (one fault per 2 MiB instead of per 4 KiB).  CPU work has no
// streams, so the events are trivially complete.
class MmapBackend final : public CachingAllocatorBackend {
 public:
  void* allocate_segment(size_t bytes) override {
    const size_t mapped = bytes + kSlack;
    const size_t padded = mapped + kHugePage;
    void* raw = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    // Trim the unaligned head and what lies beyond the slack.
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
    if (aligned > start) munmap(raw, aligned - start);
    const size_t tail = padded - (aligned - start) - mapped;
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + mapped), tail);
    void* p = reinterpret_cast<void*>(aligned);
    if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
    LOOM_POISON(p, mapped);
    return p;
  }
  void free_segment(void* ptr, size_t bytes) override {
    LOOM_UNPOISON(ptr, bytes + kSlack);
    munmap(ptr, bytes + kSlack);
  }
  void* create_event() override { return this; }
  void destroy_event(void*) override {}
  void record_event(void*, StreamId) override {}
  bool query_event(void*) override { return true; }
  void synchronize_event(void*) override {}
};

// What allocator_for(kCPU) returns.  One lock around the cache (and the
// malloc-mode counters) also guards ASAN poisoning and fork().
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : mode_(read_mode()) {
    // Scratch buffers of kernels (std::vector) still come from glibc: keep
    // its freed blocks up to 32 MiB in the heap instead of fresh mmap()s.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (mode_ == "caching") cache_ = new CachingAllocator(std::make_unique<MmapBackend>(), "cpu");
  }
  // Never destroyed (see instance()): tensors in other static objects may be
  // freed after this one would be.

  DataPtr allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return {nullptr, [](void*) {}};
    std::lock_guard<std::mutex> lock(mutex_);
    if (cache_ != nullptr) {
      void* p = cache_->allocate(nbytes, 0);
      LOOM_UNPOISON(p, nbytes);
      const size_t rounded = CachingAllocator::round_size(nbytes);
      return {p, [this, rounded](void* q) { free_cached(q, rounded); }};
    }
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    LOOM_CHECK(p != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    count_malloc(static_cast<int64_t>(rounded), static_cast<int64_t>(nbytes));
    return {p, [this, rounded](void* q) { free_malloced(q, rounded); }};
  }

  CachingAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cache_ != nullptr ? cache_->stats() : malloc_stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cache_ != nullptr) {
      cache_->reset_peak_stats();
    } else {
      malloc_stats_.peak_allocated_bytes = malloc_stats_.allocated_bytes;
      malloc_stats_.peak_reserved_bytes = malloc_stats_.reserved_bytes;
    }
  }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cache_ != nullptr) cache_->empty_cache();
  }
  const std::string& mode() const { return mode_; }

  // fork(): the child gets the memory as it was, with the lock free.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  static std::string read_mode() {
    const char* env = std::getenv("LOOM_CPU_ALLOCATOR");
    const std::string mode = env == nullptr || *env == '\0' ? "caching" : env;
    LOOM_CHECK(mode == "caching" || mode == "malloc",
               "LOOM_CPU_ALLOCATOR: expected \"caching\" or \"malloc\", got \"", mode, "\"");
    return mode;
  }
  void free_cached(void* q, size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Poison first: once back in the pool another thread may take the block.
    LOOM_POISON(q, rounded);
    cache_->free(q);
  }
  void count_malloc(int64_t rounded, int64_t requested) {
    CachingAllocatorStats& s = malloc_stats_;
    s.allocated_bytes += rounded;
    s.reserved_bytes += rounded;
    s.requested_bytes += requested;
    s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, s.allocated_bytes);
    s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, s.reserved_bytes);
    ++s.num_allocs;
  }
  void free_malloced(void* q, size_t rounded) {
    std::free(q);
    std::lock_guard<std::mutex> lock(mutex_);
    malloc_stats_.allocated_bytes -= static_cast<int64_t>(rounded);
    malloc_stats_.reserved_bytes -= static_cast<int64_t>(rounded);
    ++malloc_stats_.num_frees;
  }

  const std::string mode_;
  CachingAllocator* cache_ = nullptr;  // null in malloc mode
  CachingAllocatorStats malloc_stats_;
  std::mutex mutex_;
};

CpuAllocator& instance() {
  static CpuAllocator* allocator = [] {
    auto* a = new CpuAllocator();
    pthread_atfork([] { instance().lock_for_fork(); }, [] { instance().unlock_after_fork(); },
                   [] { instance().unlock_after_fork(); });
    return a;
  }();
  return *allocator;
}

}  // namespace

Allocator& host_allocator() { return instance(); }

const std::string& allocator_mode() { return instance().mode(); }
CachingAllocatorStats memory_stats() { return instance().stats(); }
int64_t memory_allocated() { return memory_stats().allocated_bytes; }
int64_t memory_reserved() { return memory_stats().reserved_bytes; }
int64_t max_memory_allocated() { return memory_stats().peak_allocated_bytes; }
void reset_peak_memory_stats() { instance().reset_peak(); }
void empty_cache() { instance().empty_cache(); }

}  // namespace cpu
}  // namespace loom
