// The caching allocator on real GPUs (cudaMalloc backend) and pinned host
// memory.  Tagged gpu; every case skips itself where no GPU is visible.  The
// allocator's policy itself is tested on CPU in caching_allocator_test.cpp.
#include <cstring>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

constexpr int64_t kMiB = 1 << 20;

class CudaAllocator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
    cuda::synchronize(0);
    cuda::empty_cache();
    cuda::reset_peak_memory_stats(0);
  }
};

TEST_F(CudaAllocator, IsTheAllocatorForCuda) {
  EXPECT_EQ(&allocator_for(kCUDA), &cuda::device_allocator());
}

TEST_F(CudaAllocator, StatsFollowAllocAndFree) {
  if (!cuda::device_memory_cached())
    GTEST_SKIP() << "LOOM_CUDA_NO_CACHING: the cache this checks is off";
  const auto before = cuda::memory_stats(0);
  {
    Tensor t = empty({1000}, TensorOptions(kFloat32).device(Device("cuda:0")));  // 4000 bytes
    auto s = cuda::memory_stats(0);
    EXPECT_EQ(s.allocated_bytes - before.allocated_bytes, 4096);  // rounded to 512
    EXPECT_EQ(s.requested_bytes - before.requested_bytes, 4000);
    EXPECT_GE(s.reserved_bytes, 2 * kMiB);
    EXPECT_EQ(s.num_allocs - before.num_allocs, 1);
    EXPECT_EQ(cuda::memory_allocated(0), s.allocated_bytes);
  }
  auto s = cuda::memory_stats(0);
  EXPECT_EQ(s.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(s.num_frees - before.num_frees, 1);
  EXPECT_GE(cuda::max_memory_allocated(0), before.allocated_bytes + 4096);
}

TEST_F(CudaAllocator, FreedMemoryIsReused) {
  if (!cuda::device_memory_cached())
    GTEST_SKIP() << "LOOM_CUDA_NO_CACHING: the cache this checks is off";
  void* first = nullptr;
  {
    Tensor t = empty({256, 1024}, TensorOptions(kFloat32).device(Device("cuda:0")));  // 1 MiB
    first = t.data_ptr();
  }
  const int64_t segments = cuda::memory_stats(0).num_segment_allocs;
  Tensor again = empty({256, 1024}, TensorOptions(kFloat32).device(Device("cuda:0")));
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(cuda::memory_stats(0).num_segment_allocs, segments);
}

TEST_F(CudaAllocator, EmptyCacheReturnsFreeSegments) {
  if (!cuda::device_memory_cached())
    GTEST_SKIP() << "LOOM_CUDA_NO_CACHING: the cache this checks is off";
  {
    Tensor big = empty({64 * kMiB}, TensorOptions(kUInt8).device(Device("cuda:0")));
    EXPECT_GE(cuda::memory_reserved(0), 64 * kMiB);
  }
  EXPECT_GE(cuda::memory_reserved(0), 64 * kMiB);  // cached
  const int64_t released = cuda::memory_stats(0).num_segment_frees;
  cuda::empty_cache();
  EXPECT_LT(cuda::memory_reserved(0), 64 * kMiB);
  EXPECT_GT(cuda::memory_stats(0).num_segment_frees, released);
}

TEST_F(CudaAllocator, OutOfMemoryNamesSizesAndDevice) {
  const size_t total = cuda::get_device_properties(0).total_memory;
  EXPECT_LOOM_ERROR(empty({static_cast<int64_t>(total) * 2}, TensorOptions(kUInt8).device(
                              Device("cuda:0"))),
                    "out of memory on cuda:0", "tried to allocate", "allocated", "reserved",
                    "MiB free of");
  EXPECT_GE(cuda::memory_stats(0).num_ooms, 1);
  // Still usable afterwards.
  Tensor small = zeros({4}, Device("cuda:0"));
  EXPECT_EQ(small.cpu().sum().item(), 0.0);
}

TEST_F(CudaAllocator, BadDeviceIndexThrows) {
  const int n = cuda::device_count();
  EXPECT_LOOM_ERROR(empty({4}, Device(kCUDA, n)), "invalid CUDA device index " + std::to_string(n),
                    std::to_string(n) + " CUDA device");
  EXPECT_LOOM_ERROR(cuda::memory_stats(n), "cuda::memory_stats", "invalid CUDA device index");
}

TEST_F(CudaAllocator, RecordStreamOnTheDefaultStreamIsAccepted) {
  Tensor t = empty({16}, Device("cuda:0"));
  cuda::record_stream(t.storage(), 0);  // its own stream: nothing to defer
  Tensor host = ones({16});
  EXPECT_LOOM_ERROR(cuda::record_stream(host.storage(), 0), "not from loom's pinned allocator");
}

TEST_F(CudaAllocator, PinnedMemoryIsPinnedAndCached) {
  Tensor p = cuda::pinned_empty({3, 5}, kFloat64);
  EXPECT_TRUE(p.is_cpu());
  EXPECT_TRUE(p.is_pinned());
  EXPECT_EQ(p.sizes(), (IntList{3, 5}));
  EXPECT_EQ(p.dtype(), kFloat64);
  std::memset(p.data_ptr(), 0, p.nbytes());  // writable host memory
  EXPECT_FALSE(ones({3}).is_pinned());
  void* first = p.data_ptr();
  p = Tensor();
  Tensor q = cuda::pinned_empty({3, 5}, kFloat64);
  EXPECT_EQ(q.data_ptr(), first);
  EXPECT_GE(cuda::pinned_memory_stats().num_allocs, 2);
}

}  // namespace
}  // namespace loom
