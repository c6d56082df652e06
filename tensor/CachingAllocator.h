// CachingAllocator: a device-memory cache in the spirit of PyTorch's
// CUDACachingAllocator, written as plain C++ against a small backend so the
// whole policy is unit-tested on CPU (tests/tensor/caching_allocator_test.cpp
// uses a fake backend; tensor/cuda/Memory.cu plugs in cudaMalloc/cudaFree
// and cudaEvent*).
//
// Why cache: cudaMalloc/cudaFree are slow and synchronise the device, and a
// training step frees and reallocates the same activations every iteration.
// Freed blocks are kept and handed out again; memory goes back to the device
// only on empty_cache() or when an allocation would otherwise fail.
//
// Policy (the numbers are PyTorch's):
//   - Sizes round up to multiples of 512 bytes (kRoundBytes); 0 bytes gives
//     nullptr and touches nothing.
//   - Requests <= 1 MiB come from the small pool, carved out of 2 MiB
//     segments; larger ones from the large pool.  A large request below
//     10 MiB gets a 20 MiB segment (so a few can share one), a bigger one a
//     segment rounded up to 2 MiB.
//   - The best fit (smallest free block that is big enough) is taken; it is
//     split when the rest is worth keeping (>= 512 bytes in the small pool,
//     > 1 MiB in the large pool), and freed blocks merge with free neighbours
//     of the same segment.
//   - Pools are per stream: a block allocated on stream S returns to S's
//     pool and is handed out only to later allocations on S, whose work is
//     ordered after the freed block's last use without any synchronisation.
//   - record_stream(ptr, T) says the block is also used by work on stream T.
//     When such a block is freed, an event is recorded on each such stream;
//     the block is reused only once all of them have completed.
//   - Out of memory: the cache is emptied (after waiting for pending events)
//     and the allocation retried once; if it still fails, loom::Error says
//     how much was asked, how much is allocated and reserved, and where.
//   - keep_pool(S) keeps S's free segments from being returned to the
//     backend (by empty_cache or the out-of-memory retry) until
//     release_pool(S): a captured CUDA graph (tensor/CudaGraph.h) allocates
//     on a private stream and its replays keep writing the blocks it freed
//     during capture.
//   - begin_capture()/end_capture() bracket a CUDA graph capture (counted).
//     While one is underway the allocator makes no event call and returns
//     no segment, as PyTorch's: querying an event recorded during a capture
//     is an error, and waiting for one (or cudaFree's implicit
//     synchronisation) breaks the capture.  So allocate() leaves pending
//     frees alone and does not empty the cache to retry, empty_cache() does
//     nothing, and a freed block used on other streams waits without events
//     (they are recorded once no capture is underway).
//   - caching = false (LOOM_CUDA_NO_CACHING=1 for the CUDA devices, as
//     PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING): every block is its own
//     segment of exactly the rounded size, returned to the backend as soon
//     as it is free (pending events done, no capture underway, its pool not
//     kept).  Slow; for memory checkers (compute-sanitizer, the CUDA
//     emulator's guard pages), which then see each tensor's own bounds.
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

// An opaque stream handle (a cudaStream_t cast to an integer for CUDA).
using StreamId = uint64_t;

// What the cache needs from a device: raw segments and events.  One backend
// serves one device.  Apart from allocate_segment's nullptr, failures throw.
class CachingAllocatorBackend {
 public:
  virtual ~CachingAllocatorBackend() = default;
  // `bytes` of fresh memory, or nullptr when the device is out of memory.
  virtual void* allocate_segment(size_t bytes) = 0;
  // Returns a segment from allocate_segment (with its size).
  virtual void free_segment(void* ptr, size_t bytes) = 0;
  // Events: opaque handles that complete when the work queued on a stream
  // before record_event has finished.
  virtual void* create_event() = 0;
  virtual void destroy_event(void* event) = 0;
  virtual void record_event(void* event, StreamId stream) = 0;
  virtual bool query_event(void* event) = 0;       // true when complete
  virtual void synchronize_event(void* event) = 0;  // blocks until complete
  // Extra words for the out-of-memory message (e.g. the device's free and
  // total memory); may be empty.
  virtual std::string describe_memory() { return {}; }
};

// Counters of one CachingAllocator.  Bytes are of rounded blocks.
struct CachingAllocatorStats {
  int64_t allocated_bytes = 0;       // in blocks handed out and not yet freed
  int64_t requested_bytes = 0;       // what callers asked for (unrounded)
  int64_t reserved_bytes = 0;        // in segments obtained from the backend
  int64_t peak_allocated_bytes = 0;  // max allocated_bytes since the last reset
  int64_t peak_reserved_bytes = 0;   // max reserved_bytes since the last reset
  int64_t num_allocs = 0;            // allocate() calls that returned memory
  int64_t num_frees = 0;             // free() calls
  int64_t num_segments = 0;          // segments held now
  int64_t num_segment_allocs = 0;    // backend allocate_segment successes
  int64_t num_segment_frees = 0;     // backend free_segment calls
  int64_t num_pending_frees = 0;     // freed blocks waiting on stream events
  int64_t num_ooms = 0;              // allocations that failed for memory
  int64_t num_cache_flushes = 0;     // times the cache was emptied to retry
};

class CachingAllocator {
 public:
  static constexpr size_t kRoundBytes = 512;             // size granularity
  static constexpr size_t kSmallRequest = 1 << 20;       // small pool limit
  static constexpr size_t kSmallSegment = 2 << 20;       // small pool segment
  static constexpr size_t kMinLargeAlloc = 10 << 20;     // below: 20 MiB segment
  static constexpr size_t kLargeSegment = 20 << 20;
  static constexpr size_t kLargeRound = 2 << 20;         // large segment rounding

  // `device_name` ("cuda:0") appears in error messages; caching = false:
  // one segment per block, returned when freed (see the policy above).
  CachingAllocator(std::unique_ptr<CachingAllocatorBackend> backend, std::string device_name,
                   bool caching = true);
  // Returns every segment to the backend (also ones still allocated) and
  // destroys pending events.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least nbytes (512-byte aligned relative to its segment)
  // for use on `stream`; nullptr for 0 bytes.  Throws loom::Error when the
  // device is out of memory even after emptying the cache.
  void* allocate(size_t nbytes, StreamId stream);
  // Returns a block from allocate() to its stream's pool (or, after
  // record_stream, to the pending list).  nullptr is ignored.  Throws
  // loom::Error for a pointer that is not an allocated block: a double free,
  // a pointer into a block, or memory this allocator never gave out.
  void free(void* ptr);
  // Marks the allocated block at ptr as used by work on `stream`, so free()
  // defers its reuse until that work (queued before the free) has finished.
  // Throws loom::Error when ptr is not an allocated block.
  void record_stream(void* ptr, StreamId stream);
  // Waits for pending events, then returns every wholly free segment to the
  // backend, except those of kept pools.  Allocated blocks stay valid.
  void empty_cache();
  // Keeps stream's pool (counted: each keep_pool needs a release_pool).
  // release_pool throws loom::Error for a pool that is not kept.
  void keep_pool(StreamId stream);
  void release_pool(StreamId stream);
  // A CUDA graph capture starts / ends (see the policy above); end_capture
  // throws loom::Error without a matching begin_capture.
  void begin_capture();
  void end_capture();

  CachingAllocatorStats stats() const;
  // Sets the peaks to the current values.
  void reset_peak_stats();
  // The rounded size allocate() uses for a request.
  static size_t round_size(size_t nbytes);
  // True when ptr is the start of a block handed out and not yet freed.
  bool is_allocated(const void* ptr) const;
  const std::string& device_name() const { return device_name_; }

 private:
  enum class State { kFree, kAllocated, kPending };
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;
    StreamId stream = 0;
    bool small = false;  // which pool
    State state = State::kFree;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    std::vector<StreamId> stream_uses;  // from record_stream
    std::vector<void*> events;          // pending: one per stream use
  };
  struct BlockOrder {  // pools: by stream, then size, then address
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  Pool& pool_of(const Block* b) { return b->small ? small_pool_ : large_pool_; }
  Block* find_free(bool small, StreamId stream, size_t size);
  Block* new_segment(bool small, StreamId stream, size_t size);  // nullptr: no memory
  void split(Block* b, size_t size);
  void free_block(Block* b);          // merges with free neighbours, pools it
  void record_use_events(Block* b);   // one event per stream use, then forgets the uses
  // Pools pending blocks whose events are done (none while capturing);
  // first records the events of blocks freed during a capture.
  void process_events(bool wait);
  void release_cached_segments();     // frees wholly free segments
  void release_segment(Block* head);
  [[noreturn]] void fail_out_of_memory(size_t nbytes, size_t rounded);

  std::unique_ptr<CachingAllocatorBackend> backend_;
  std::string device_name_;
  bool caching_ = true;
  mutable std::mutex mutex_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<const void*, Block*> allocated_;
  std::map<const char*, Block*> segments_;  // segment start -> its first block
  std::map<const char*, size_t> segment_sizes_;
  std::vector<Block*> pending_;
  std::vector<Block*> freed_while_capturing_;  // pending, events not yet recorded
  int captures_ = 0;                           // captures underway
  std::map<StreamId, int> kept_pools_;  // stream -> keep_pool count
  CachingAllocatorStats stats_;
};

}  // namespace loom
