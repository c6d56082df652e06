#include "tensor/CachingAllocator.h"

#include <algorithm>
#include <cstdio>

#include "tensor/Error.h"

namespace loom {
namespace {

// "512 bytes", "1.50 MiB", "2.00 GiB": sizes a reader can take in at a glance.
std::string format_bytes(int64_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  return buf;
}

std::string format_ptr(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

}  // namespace

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

CachingAllocator::CachingAllocator(std::unique_ptr<CachingAllocatorBackend> backend,
                                   std::string device_name, bool caching)
    : backend_(std::move(backend)), device_name_(std::move(device_name)), caching_(caching) {
  LOOM_CHECK(backend_ != nullptr, "CachingAllocator for ", device_name_, ": backend is null");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Block* b : pending_)
    for (void* e : b->events) backend_->destroy_event(e);
  pending_.clear();
  freed_while_capturing_.clear();  // no events yet; the blocks go with their segments
  // Every block belongs to exactly one segment: walk each segment's chain.
  for (auto& [start, head] : segments_) {
    backend_->free_segment(const_cast<char*>(start), segment_sizes_[start]);
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) return 0;
  return (nbytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

CachingAllocator::Block* CachingAllocator::find_free(bool small, StreamId stream, size_t size) {
  Pool& pool = small ? small_pool_ : large_pool_;
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(bool small, StreamId stream,
                                                       size_t size) {
  size_t bytes = kSmallSegment;
  if (!caching_)
    bytes = size;  // the block alone
  else if (!small)
    bytes = size < kMinLargeAlloc ? kLargeSegment
                                  : (size + kLargeRound - 1) / kLargeRound * kLargeRound;
  void* p = backend_->allocate_segment(bytes);
  if (p == nullptr) return nullptr;
  auto* b = new Block();
  b->ptr = static_cast<char*>(p);
  b->size = bytes;
  b->stream = stream;
  b->small = small;
  segments_[b->ptr] = b;
  segment_sizes_[b->ptr] = bytes;
  stats_.reserved_bytes += static_cast<int64_t>(bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  ++stats_.num_segments;
  ++stats_.num_segment_allocs;
  return b;
}

void CachingAllocator::split(Block* b, size_t size) {
  const size_t rest = b->size - size;
  const bool worth = b->small ? rest >= kRoundBytes : rest > kSmallRequest;
  if (!worth) return;
  auto* r = new Block();
  r->ptr = b->ptr + size;
  r->size = rest;
  r->stream = b->stream;
  r->small = b->small;
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  pool_of(r).insert(r);
}

void* CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  process_events(/*wait=*/false);
  const size_t size = round_size(nbytes);
  LOOM_CHECK(size >= nbytes, "CachingAllocator: request of ", nbytes, " bytes on ",
             device_name_, " is too large");
  const bool small = size <= kSmallRequest;
  Block* b = find_free(small, stream, size);
  if (b == nullptr) b = new_segment(small, stream, size);
  if (b == nullptr && captures_ == 0) {
    // Out of memory: wait for pending frees (one may now fit), give every
    // wholly free segment back to the device, and try once more (not during
    // a capture: see the header).
    ++stats_.num_cache_flushes;
    process_events(/*wait=*/true);
    release_cached_segments();
    b = find_free(small, stream, size);
    if (b == nullptr) b = new_segment(small, stream, size);
  }
  if (b == nullptr) fail_out_of_memory(nbytes, size);
  split(b, size);
  b->state = State::kAllocated;
  b->requested = nbytes;
  allocated_[b->ptr] = b;
  stats_.allocated_bytes += static_cast<int64_t>(b->size);
  stats_.requested_bytes += static_cast<int64_t>(nbytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  ++stats_.num_allocs;
  return b->ptr;
}

void CachingAllocator::fail_out_of_memory(size_t nbytes, size_t rounded) {
  ++stats_.num_ooms;
  const int64_t cached = stats_.reserved_bytes - stats_.allocated_bytes;
  std::string extra = backend_->describe_memory();
  LOOM_FAIL("out of memory on ", device_name_, ": tried to allocate ",
            format_bytes(static_cast<int64_t>(nbytes)), " (", nbytes, " bytes, ", rounded,
            " rounded); loom's caching allocator has ", format_bytes(stats_.allocated_bytes),
            " allocated and ", format_bytes(stats_.reserved_bytes), " reserved (",
            format_bytes(cached), " reserved but unallocated) on ", device_name_,
            extra.empty() ? "" : "; ", extra,
            captures_ > 0 ? "; a CUDA graph capture is underway, so the cache was not emptied "
                            "to retry"
                          : "",
            ". Free tensors you no longer need, or use a smaller batch.");
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) {
    const char* p = static_cast<const char*>(ptr);
    auto seg = segments_.upper_bound(p);
    const bool inside = seg != segments_.begin() &&
                        p < std::prev(seg)->first + segment_sizes_[std::prev(seg)->first];
    LOOM_FAIL("CachingAllocator::free: pointer ", format_ptr(ptr), " on ", device_name_,
              inside ? " lies in memory this allocator manages but is not an allocated "
                       "block: a double free, or a pointer into the middle of a block"
                     : " was not allocated by this allocator (a foreign pointer)");
  }
  Block* b = it->second;
  allocated_.erase(it);
  stats_.allocated_bytes -= static_cast<int64_t>(b->size);
  stats_.requested_bytes -= static_cast<int64_t>(b->requested);
  ++stats_.num_frees;
  if (b->stream_uses.empty()) {
    free_block(b);
    return;
  }
  b->state = State::kPending;
  ++stats_.num_pending_frees;
  if (captures_ > 0) {
    // No event calls during a capture: recorded once it has ended.
    freed_while_capturing_.push_back(b);
    return;
  }
  record_use_events(b);
  pending_.push_back(b);
}

void CachingAllocator::record_use_events(Block* b) {
  // Used on other streams: reusable only once their work queued so far is done.
  for (StreamId s : b->stream_uses) {
    void* e = backend_->create_event();
    backend_->record_event(e, s);
    b->events.push_back(e);
  }
  b->stream_uses.clear();
}

void CachingAllocator::free_block(Block* b) {
  b->state = State::kFree;
  b->requested = 0;
  if (b->prev && b->prev->state == State::kFree) {
    Block* p = b->prev;
    pool_of(p).erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (b->next && b->next->state == State::kFree) {
    Block* n = b->next;
    pool_of(n).erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool_of(b).insert(b);
  // Without caching a free block (a whole segment) goes back at once, unless
  // a capture is underway or its pool is kept (a graph's replays use it).
  if (!caching_ && b->prev == nullptr && b->next == nullptr && captures_ == 0 &&
      kept_pools_.count(b->stream) == 0)
    release_segment(b);
}

void CachingAllocator::process_events(bool wait) {
  if (captures_ > 0) return;
  for (Block* b : freed_while_capturing_) {
    record_use_events(b);
    pending_.push_back(b);
  }
  freed_while_capturing_.clear();
  std::vector<Block*> still;
  for (Block* b : pending_) {
    bool done = true;
    for (void* e : b->events) {
      if (wait)
        backend_->synchronize_event(e);
      else if (!backend_->query_event(e))
        done = false;
    }
    if (!done) {
      still.push_back(b);
      continue;
    }
    for (void* e : b->events) backend_->destroy_event(e);
    b->events.clear();
    --stats_.num_pending_frees;
    free_block(b);
  }
  pending_ = std::move(still);
}

void CachingAllocator::release_segment(Block* head) {
  pool_of(head).erase(head);
  backend_->free_segment(head->ptr, head->size);
  stats_.reserved_bytes -= static_cast<int64_t>(head->size);
  --stats_.num_segments;
  ++stats_.num_segment_frees;
  segment_sizes_.erase(head->ptr);
  segments_.erase(head->ptr);
  delete head;
}

void CachingAllocator::release_cached_segments() {
  std::vector<Block*> whole;
  for (Pool* pool : {&small_pool_, &large_pool_})
    for (Block* b : *pool)
      if (b->prev == nullptr && b->next == nullptr && kept_pools_.count(b->stream) == 0)
        whole.push_back(b);
  for (Block* b : whole) release_segment(b);
}

void CachingAllocator::begin_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++captures_;
}

void CachingAllocator::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  LOOM_CHECK(captures_ > 0, "CachingAllocator::end_capture on ", device_name_,
             ": no capture is underway (end_capture without begin_capture)");
  --captures_;
}

void CachingAllocator::keep_pool(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++kept_pools_[stream];
}

void CachingAllocator::release_pool(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kept_pools_.find(stream);
  LOOM_CHECK(it != kept_pools_.end(), "CachingAllocator::release_pool: the pool of stream ",
             stream, " on ", device_name_, " is not kept (release_pool without keep_pool)");
  if (--it->second == 0) kept_pools_.erase(it);
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocated_.find(ptr);
  LOOM_CHECK(it != allocated_.end(), "CachingAllocator::record_stream: pointer ",
             format_ptr(ptr), " on ", device_name_,
             " is not the start of a block allocated by this allocator");
  Block* b = it->second;
  if (stream == b->stream) return;  // its own stream orders the reuse already
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
    b->stream_uses.push_back(stream);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captures_ > 0) return;  // no waits or frees during a capture
  process_events(/*wait=*/true);
  release_cached_segments();
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

bool CachingAllocator::is_allocated(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_.count(ptr) > 0;
}

}  // namespace loom
