// The caching allocator's policy (tensor/CachingAllocator.h) on a fake
// backend: segments come from malloc under a capacity limit, and each stream
// is a counter of "launched" and "finished" work, so tests decide exactly when
// an event completes.  Runs on every machine; the CUDA backend's own checks
// are in cuda_allocator_test.cpp (gpu).
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "tensor/CachingAllocator.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

constexpr size_t kMiB = 1 << 20;

class FakeBackend : public CachingAllocatorBackend {
 public:
  explicit FakeBackend(size_t capacity) : capacity_(capacity) {}
  ~FakeBackend() override {
    EXPECT_TRUE(segments_.empty()) << segments_.size() << " segments leaked";
    EXPECT_EQ(live_events_, 0) << "events leaked";
  }

  void* allocate_segment(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    void* p = std::aligned_alloc(512, bytes);
    used_ += bytes;
    segments_[p] = bytes;
    ++segment_allocs;
    return p;
  }
  void free_segment(void* ptr, size_t bytes) override {
    auto it = segments_.find(ptr);
    ASSERT_NE(it, segments_.end()) << "freeing an unknown segment";
    EXPECT_EQ(it->second, bytes);
    used_ -= bytes;
    segments_.erase(it);
    std::free(ptr);
    ++segment_frees;
  }

  struct FakeEvent {
    StreamId stream = 0;
    int64_t target = -1;  // stream work count at record time
  };
  void* create_event() override {
    ++event_calls;
    ++live_events_;
    return new FakeEvent();
  }
  void destroy_event(void* e) override {
    --live_events_;
    delete static_cast<FakeEvent*>(e);
  }
  void record_event(void* e, StreamId s) override {
    ++event_calls;
    auto* ev = static_cast<FakeEvent*>(e);
    ev->stream = s;
    ev->target = launched_[s];
  }
  bool query_event(void* e) override {
    ++event_calls;
    auto* ev = static_cast<FakeEvent*>(e);
    return finished_[ev->stream] >= ev->target;
  }
  void synchronize_event(void* e) override {
    ++event_calls;
    auto* ev = static_cast<FakeEvent*>(e);
    finished_[ev->stream] = std::max(finished_[ev->stream], ev->target);
  }
  std::string describe_memory() override {
    return "fake device: " + std::to_string(capacity_ - used_) + " bytes free";
  }

  // Queue one piece of work on s / let all queued work on s finish.
  void launch(StreamId s) { ++launched_[s]; }
  void finish(StreamId s) { finished_[s] = launched_[s]; }

  size_t used() const { return used_; }
  int segment_allocs = 0;
  int segment_frees = 0;
  int event_calls = 0;  // create, record, query, synchronize

 private:
  size_t capacity_;
  size_t used_ = 0;
  std::map<void*, size_t> segments_;
  std::map<StreamId, int64_t> launched_, finished_;
  int live_events_ = 0;
};

struct Fixture {
  explicit Fixture(size_t capacity = 256 * kMiB, bool caching = true) {
    auto b = std::make_unique<FakeBackend>(capacity);
    fake = b.get();
    alloc = std::make_unique<CachingAllocator>(std::move(b), "fake:0", caching);
  }
  FakeBackend* fake;
  std::unique_ptr<CachingAllocator> alloc;
};

char* as_bytes(void* p) { return static_cast<char*>(p); }

TEST(CachingAllocator, RoundsTo512Bytes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 0u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  Fixture f;
  EXPECT_EQ(f.alloc->allocate(0, 0), nullptr);
  EXPECT_EQ(f.alloc->stats().num_allocs, 0);
  void* p = f.alloc->allocate(100, 0);
  auto s = f.alloc->stats();
  EXPECT_EQ(s.allocated_bytes, 512);
  EXPECT_EQ(s.requested_bytes, 100);
  f.alloc->free(p);
  f.alloc->free(nullptr);  // ignored
}

TEST(CachingAllocator, SmallRequestsShareOneSegment) {
  Fixture f;
  void* a = f.alloc->allocate(1000, 0);  // 1024
  void* b = f.alloc->allocate(512, 0);
  void* c = f.alloc->allocate(kMiB, 0);  // largest small request
  auto s = f.alloc->stats();
  EXPECT_EQ(s.num_segments, 1);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(1024 + 512 + kMiB));
  // Split from the front of the segment, in order.
  EXPECT_EQ(as_bytes(b), as_bytes(a) + 1024);
  EXPECT_EQ(as_bytes(c), as_bytes(b) + 512);
  for (void* p : {a, b, c}) f.alloc->free(p);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 0);
  EXPECT_EQ(f.alloc->stats().reserved_bytes, static_cast<int64_t>(2 * kMiB));  // cached
}

TEST(CachingAllocator, LargeRequestsGetLargeSegments) {
  Fixture f;
  void* a = f.alloc->allocate(kMiB + 1, 0);  // large pool, 20 MiB segment
  EXPECT_EQ(f.alloc->stats().reserved_bytes, static_cast<int64_t>(20 * kMiB));
  void* b = f.alloc->allocate(3 * kMiB, 0);  // split from the same segment
  EXPECT_EQ(f.alloc->stats().num_segments, 1);
  EXPECT_EQ(as_bytes(b), as_bytes(a) + CachingAllocator::round_size(kMiB + 1));
  // >= 10 MiB and more than the segment has left: own segment, 2 MiB rounded.
  void* c = f.alloc->allocate(17 * kMiB, 0);
  EXPECT_EQ(f.alloc->stats().num_segments, 2);
  EXPECT_EQ(f.alloc->stats().reserved_bytes, static_cast<int64_t>(38 * kMiB));
  // Small and large pools never mix: a small request opens a small segment.
  void* d = f.alloc->allocate(4096, 0);
  EXPECT_EQ(f.alloc->stats().num_segments, 3);
  for (void* p : {a, b, c, d}) f.alloc->free(p);
}

TEST(CachingAllocator, LargeRemainderBelowOneMiBIsNotSplit) {
  Fixture f;
  void* a = f.alloc->allocate(11 * kMiB, 0);  // segment of 12 MiB
  f.alloc->free(a);
  // 11.5 MiB from the 12 MiB block: 0.5 MiB left is not worth a block.
  void* b = f.alloc->allocate(11 * kMiB + kMiB / 2, 0);
  EXPECT_EQ(b, a);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, static_cast<int64_t>(12 * kMiB));
  f.alloc->free(b);
}

TEST(CachingAllocator, FreedBlocksAreReusedWithoutNewSegments) {
  Fixture f;
  void* a = f.alloc->allocate(4096, 0);
  f.alloc->free(a);
  void* b = f.alloc->allocate(4000, 0);  // same rounded size: same block
  EXPECT_EQ(a, b);
  EXPECT_EQ(f.fake->segment_allocs, 1);
  f.alloc->free(b);
  EXPECT_EQ(f.alloc->stats().num_allocs, 2);
  EXPECT_EQ(f.alloc->stats().num_frees, 2);
}

TEST(CachingAllocator, BestFitPicksTheSmallestBlockThatFits) {
  Fixture f;
  void* a = f.alloc->allocate(8192, 0);
  void* gap1 = f.alloc->allocate(512, 0);
  void* b = f.alloc->allocate(2048, 0);
  void* gap2 = f.alloc->allocate(512, 0);
  f.alloc->free(a);
  f.alloc->free(b);
  EXPECT_EQ(f.alloc->allocate(2048, 0), b);
  EXPECT_EQ(f.alloc->allocate(4096, 0), a);  // split from the 8 KiB block
  void* rest = f.alloc->allocate(4096, 0);
  EXPECT_EQ(as_bytes(rest), as_bytes(a) + 4096);
  for (void* p : {a, b, gap1, gap2, rest}) f.alloc->free(p);
}

TEST(CachingAllocator, FreeNeighboursCoalesce) {
  Fixture f;
  void* a = f.alloc->allocate(kMiB / 2, 0);
  void* b = f.alloc->allocate(kMiB / 2, 0);
  void* c = f.alloc->allocate(kMiB / 2, 0);
  void* d = f.alloc->allocate(kMiB / 2, 0);  // the 2 MiB segment is full
  EXPECT_EQ(f.alloc->stats().num_segments, 1);
  // Free a and c (not adjacent), then b joins them into one 1.5 MiB block.
  f.alloc->free(a);
  f.alloc->free(c);
  f.alloc->free(b);
  // 1 MiB fits only in a+b merged; the next 512 KiB is c, split off again.
  void* big = f.alloc->allocate(kMiB, 0);
  EXPECT_EQ(big, a);
  void* next = f.alloc->allocate(kMiB / 2, 0);
  EXPECT_EQ(next, c);
  EXPECT_EQ(f.alloc->stats().num_segments, 1);
  f.alloc->free(big);
  f.alloc->free(next);
  f.alloc->free(d);
  // All free again: one whole segment that empty_cache can release.
  f.alloc->empty_cache();
  EXPECT_EQ(f.alloc->stats().num_segments, 0);
  EXPECT_EQ(f.fake->used(), 0u);
}

TEST(CachingAllocator, PoolsArePerStream) {
  Fixture f;
  const StreamId s1 = 1, s2 = 2;
  void* a = f.alloc->allocate(4096, s1);
  f.alloc->free(a);
  void* b = f.alloc->allocate(4096, s2);  // s1's cached block is not for s2
  EXPECT_NE(a, b);
  EXPECT_EQ(f.alloc->stats().num_segments, 2);
  void* c = f.alloc->allocate(4096, s1);  // but s1 gets it back
  EXPECT_EQ(a, c);
  f.alloc->free(b);
  f.alloc->free(c);
}

TEST(CachingAllocator, RecordStreamDefersReuseUntilTheStreamsWorkFinishes) {
  Fixture f;
  const StreamId mine = 1, other = 2;
  void* a = f.alloc->allocate(4096, mine);
  f.alloc->record_stream(a, other);
  f.alloc->record_stream(a, other);  // twice is once
  f.alloc->record_stream(a, mine);   // its own stream: nothing to wait for
  f.fake->launch(other);             // work on `other` that reads a
  f.alloc->free(a);
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 1);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 0);
  void* b = f.alloc->allocate(4096, mine);
  EXPECT_NE(a, b) << "reused while another stream may still read it";
  f.fake->launch(other);  // work queued after the free does not delay reuse
  f.fake->finish(other);
  void* c = f.alloc->allocate(4096, mine);
  EXPECT_EQ(a, c);
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 0);
  f.alloc->free(b);
  f.alloc->free(c);
}

TEST(CachingAllocator, RecordStreamIsForgottenAfterReuse) {
  Fixture f;
  void* a = f.alloc->allocate(4096, 1);
  f.alloc->record_stream(a, 2);
  f.alloc->free(a);  // no work on stream 2: the event completes at once
  void* b = f.alloc->allocate(4096, 1);
  EXPECT_EQ(a, b);
  f.fake->launch(2);
  f.alloc->free(b);  // no record_stream this time: straight back to the pool
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 0);
  EXPECT_EQ(f.alloc->allocate(4096, 1), a);
  f.alloc->free(a);
}

TEST(CachingAllocator, EmptyCacheReleasesOnlyWhollyFreeSegments) {
  Fixture f;
  void* keep = f.alloc->allocate(4096, 0);
  void* gone = f.alloc->allocate(3 * kMiB, 0);
  void* gone2 = f.alloc->allocate(18 * kMiB, 0);  // more than gone's segment has left
  f.alloc->free(gone);
  f.alloc->free(gone2);
  f.alloc->empty_cache();
  auto s = f.alloc->stats();
  EXPECT_EQ(s.num_segments, 1);  // the small segment holding `keep`
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.num_segment_frees, 2);
  std::memset(keep, 7, 4096);  // still valid
  f.alloc->free(keep);
}

// A kept pool (a captured CUDA graph's) survives empty_cache and the
// out-of-memory retry until it is released.
TEST(CachingAllocator, KeptPoolsAreNotReturned) {
  Fixture f(24 * kMiB);
  void* graph = f.alloc->allocate(12 * kMiB, 7);
  void* other = f.alloc->allocate(4096, 0);
  f.alloc->keep_pool(7);
  f.alloc->keep_pool(7);  // counted
  f.alloc->free(graph);
  f.alloc->free(other);
  f.alloc->empty_cache();
  EXPECT_EQ(f.alloc->stats().num_segments, 1);  // stream 0's went, the kept one stayed
  // Out of memory does not take it either.
  EXPECT_LOOM_ERROR(f.alloc->allocate(20 * kMiB, 0), "out of memory on fake:0");
  // Its stream still reuses it.
  void* again = f.alloc->allocate(12 * kMiB, 7);
  EXPECT_EQ(again, graph);
  f.alloc->free(again);
  f.alloc->release_pool(7);
  f.alloc->empty_cache();
  EXPECT_EQ(f.alloc->stats().num_segments, 1);  // one keep is left
  f.alloc->release_pool(7);
  f.alloc->empty_cache();
  EXPECT_EQ(f.alloc->stats().num_segments, 0);
  EXPECT_LOOM_ERROR(f.alloc->release_pool(7), "release_pool", "is not kept");
}

TEST(CachingAllocator, EmptyCacheWaitsForPendingFrees) {
  Fixture f;
  void* a = f.alloc->allocate(4096, 1);
  f.alloc->record_stream(a, 2);
  f.fake->launch(2);
  f.alloc->free(a);
  f.alloc->empty_cache();  // synchronizes the event, then releases
  EXPECT_EQ(f.alloc->stats().num_segments, 0);
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 0);
}

TEST(CachingAllocator, PeakStatsAndReset) {
  Fixture f;
  void* a = f.alloc->allocate(kMiB, 0);
  void* b = f.alloc->allocate(kMiB, 0);
  f.alloc->free(a);
  auto s = f.alloc->stats();
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(kMiB));
  EXPECT_EQ(s.peak_allocated_bytes, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.peak_reserved_bytes, static_cast<int64_t>(2 * kMiB));  // one small segment
  f.alloc->reset_peak_stats();
  s = f.alloc->stats();
  EXPECT_EQ(s.peak_allocated_bytes, static_cast<int64_t>(kMiB));
  EXPECT_EQ(s.peak_reserved_bytes, s.reserved_bytes);
  f.alloc->free(b);
  EXPECT_EQ(f.alloc->stats().peak_allocated_bytes, static_cast<int64_t>(kMiB));
}

TEST(CachingAllocator, OutOfMemoryRetriesAfterEmptyingTheCache) {
  Fixture f(24 * kMiB);
  void* a = f.alloc->allocate(12 * kMiB, 0);  // 12 MiB segment
  f.alloc->free(a);                           // cached
  void* b = f.alloc->allocate(20 * kMiB, 0);  // needs the 12 MiB back first
  ASSERT_NE(b, nullptr);
  auto s = f.alloc->stats();
  EXPECT_EQ(s.num_cache_flushes, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(20 * kMiB));
  f.alloc->free(b);
}

TEST(CachingAllocator, OutOfMemoryMessageSaysWhatWhereAndHowMuch) {
  Fixture f(24 * kMiB);
  void* a = f.alloc->allocate(12 * kMiB, 0);
  EXPECT_LOOM_ERROR(f.alloc->allocate(13 * kMiB, 0), "out of memory on fake:0",
                    "tried to allocate 13.00 MiB (13631488 bytes",
                    "12.00 MiB allocated and 12.00 MiB reserved", "fake device:");
  EXPECT_EQ(f.alloc->stats().num_ooms, 1);
  f.alloc->free(a);
  // The failure left the allocator usable.
  void* b = f.alloc->allocate(4096, 0);
  f.alloc->free(b);
}

// During a capture no event is created, recorded, queried or waited for:
// pending frees stay pending even when their streams have finished, a freed
// block used on another stream waits without an event, and empty_cache()
// does nothing.  Once the capture ends, the next allocation records the
// deferred events and pools what is done.
TEST(CachingAllocator, CapturesMakeNoEventCalls) {
  Fixture f;
  void* a = f.alloc->allocate(4096, 1);
  f.alloc->record_stream(a, 2);
  f.fake->launch(2);
  f.alloc->free(a);  // pending on an event of stream 2
  f.alloc->begin_capture();
  const int calls = f.fake->event_calls;
  void* b = f.alloc->allocate(4096, 1);
  f.fake->finish(2);
  void* c = f.alloc->allocate(4096, 1);
  EXPECT_NE(c, a) << "a pending free was pooled during a capture";
  void* d = f.alloc->allocate(8192, 1);
  f.alloc->record_stream(d, 3);
  f.alloc->free(d);
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 2);
  const int64_t segments = f.alloc->stats().num_segments;
  f.alloc->empty_cache();
  EXPECT_EQ(f.alloc->stats().num_segments, segments);
  EXPECT_EQ(f.fake->event_calls, calls) << "event calls during a capture";
  EXPECT_EQ(f.fake->segment_frees, 0);
  f.alloc->end_capture();
  void* e = f.alloc->allocate(4096, 1);
  EXPECT_EQ(e, a) << "a's stream finished: reusable once the capture has ended";
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 0);  // d's stream 3 had no work
  for (void* p : {b, c, e}) f.alloc->free(p);
  EXPECT_LOOM_ERROR(f.alloc->end_capture(), "end_capture", "fake:0", "no capture");
}

// Captures are counted: the policy holds until the last one ends.
TEST(CachingAllocator, NestedCapturesAreCounted) {
  Fixture f;
  void* a = f.alloc->allocate(4096, 1);
  f.alloc->record_stream(a, 2);
  f.alloc->begin_capture();
  f.alloc->begin_capture();
  f.alloc->free(a);
  f.alloc->end_capture();
  EXPECT_NE(f.alloc->allocate(4096, 1), a);
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 1);
  f.alloc->end_capture();
  f.alloc->empty_cache();
  EXPECT_EQ(f.alloc->stats().num_pending_frees, 0);
}

// Out of memory during a capture fails without emptying the cache (no waits,
// no segment frees) and says why; after the capture the retry works again.
TEST(CachingAllocator, OutOfMemoryDuringACaptureDoesNotEmptyTheCache) {
  Fixture f(24 * kMiB);
  void* a = f.alloc->allocate(12 * kMiB, 0);
  f.alloc->free(a);  // cached
  f.alloc->begin_capture();
  EXPECT_LOOM_ERROR(f.alloc->allocate(20 * kMiB, 0), "out of memory on fake:0",
                    "capture is underway");
  EXPECT_EQ(f.alloc->stats().num_cache_flushes, 0);
  EXPECT_EQ(f.fake->segment_frees, 0);
  f.alloc->end_capture();
  void* b = f.alloc->allocate(20 * kMiB, 0);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(f.alloc->stats().num_cache_flushes, 1);
  f.alloc->free(b);
}

TEST(CachingAllocator, DoubleFreeAndForeignPointersThrow) {
  Fixture f;
  void* a = f.alloc->allocate(4096, 0);
  void* b = f.alloc->allocate(4096, 0);
  f.alloc->free(a);
  EXPECT_LOOM_ERROR(f.alloc->free(a), "fake:0", "double free");
  EXPECT_LOOM_ERROR(f.alloc->free(as_bytes(b) + 512), "pointer into the middle");
  int on_stack = 0;
  EXPECT_LOOM_ERROR(f.alloc->free(&on_stack), "not allocated by this allocator");
  EXPECT_LOOM_ERROR(f.alloc->record_stream(a, 3), "record_stream", "not the start");
  EXPECT_TRUE(f.alloc->is_allocated(b));
  EXPECT_FALSE(f.alloc->is_allocated(a));
  f.alloc->free(b);
  EXPECT_EQ(f.alloc->stats().num_frees, 2);
}

// caching = false (LOOM_CUDA_NO_CACHING): a segment of exactly the rounded
// size per block, returned as soon as the block is free -- after the events
// of its other streams, and not during a capture or from a kept pool.
TEST(CachingAllocator, WithoutCachingEachBlockIsItsOwnSegmentReturnedWhenFree) {
  Fixture f(256 * kMiB, /*caching=*/false);
  void* a = f.alloc->allocate(1000, 1);
  void* b = f.alloc->allocate(3 * kMiB, 1);
  EXPECT_EQ(f.fake->segment_allocs, 2);
  EXPECT_EQ(f.fake->used(), 1024 + 3 * kMiB);
  f.alloc->free(a);
  EXPECT_EQ(f.fake->segment_frees, 1);
  EXPECT_EQ(f.fake->used(), 3 * kMiB);

  f.alloc->record_stream(b, 2);
  f.fake->launch(2);
  f.alloc->free(b);
  EXPECT_EQ(f.fake->segment_frees, 1) << "returned while stream 2 may still read it";
  f.fake->finish(2);
  void* c = f.alloc->allocate(512, 1);  // processes the finished event
  EXPECT_EQ(f.fake->segment_frees, 2);
  f.alloc->free(c);
  EXPECT_EQ(f.fake->used(), 0u);

  f.alloc->begin_capture();
  void* d = f.alloc->allocate(2048, 3);
  f.alloc->free(d);
  EXPECT_EQ(f.fake->used(), 2048u) << "a capture's blocks stay until it ends";
  f.alloc->end_capture();
  f.alloc->keep_pool(4);
  void* e = f.alloc->allocate(4096, 4);
  f.alloc->free(e);
  EXPECT_EQ(f.fake->used(), 2048u + 4096u) << "a kept pool's blocks stay";
  f.alloc->release_pool(4);
  f.alloc->empty_cache();
  EXPECT_EQ(f.fake->used(), 0u);
}

TEST(CachingAllocator, DestructorReturnsEverySegment) {
  // FakeBackend's destructor fails the test on leaked segments or events.
  Fixture f;
  f.alloc->allocate(4096, 0);   // never freed
  void* p = f.alloc->allocate(3 * kMiB, 1);
  f.alloc->record_stream(p, 2);
  f.fake->launch(2);
  f.alloc->free(p);  // pending at destruction
  f.alloc.reset();
}

}  // namespace
}  // namespace loom
