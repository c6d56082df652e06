// loom::cuda memory (tensor/CudaMemory.h): the Allocator adapters over the
// caching allocators of tensor/cuda/Memory.cu, and stubs without CUDA.
#include "tensor/CudaMemory.h"

#include <cstdio>

#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"

#ifdef LOOM_WITH_CUDA
#include "tensor/cuda/Memory.h"
#endif

namespace loom {
namespace cuda {

#ifdef LOOM_WITH_CUDA

namespace {

// A deleter runs in Storage's destructor, which must not throw: a failed
// free (a CUDA error) is reported on stderr instead.
std::function<void(void*)> freeing_into(CachingAllocator* cache) {
  return [cache](void* p) {
    try {
      cache->free(p);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loom: freeing CUDA memory failed: %s\n", e.what());
    }
  };
}

class DeviceAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_CHECK(device.is_cuda(), "CUDA allocator: expected a cuda device, got ", device);
    check_device(device.index, "CUDA allocator");
    if (nbytes == 0) return {nullptr, [](void*) {}};
    CachingAllocator& cache = device_caching_allocator(device.index);
    void* p = cache.allocate(nbytes, current_stream_handle(device.index));
    return {p, freeing_into(&cache)};
  }
};

// Pinned blocks are allocated on no stream: whoever reuses them is the host,
// which no CUDA stream orders, so every stream that used a block (through
// record_stream, which copies call) must finish before it is reused.
constexpr StreamId kHostStream = ~StreamId{0};

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_CHECK(device.is_cpu(), "pinned allocator: pinned memory is host memory; expected a "
               "cpu device, got ", device);
    if (nbytes == 0) return {nullptr, [](void*) {}};
    CachingAllocator& cache = pinned_caching_allocator();
    return {cache.allocate(nbytes, kHostStream), freeing_into(&cache)};
  }
};

}  // namespace

Allocator& device_allocator() {
  static DeviceAllocator* allocator = [] {
    auto* a = new DeviceAllocator();  // leaked: Storage may outlive statics
    set_allocator(kCUDA, a);
    return a;
  }();
  return *allocator;
}

CachingAllocatorStats memory_stats(int device) {
  check_device(device, "cuda::memory_stats");
  return device_caching_allocator(device).stats();
}

void reset_peak_memory_stats(int device) {
  check_device(device, "cuda::reset_peak_memory_stats");
  device_caching_allocator(device).reset_peak_stats();
}

void empty_cache() {
  if (is_available()) empty_all_caches();
}

void record_stream(const Storage& storage, uint64_t stream_handle) {
  LOOM_CHECK(storage.defined(), "cuda::record_stream: the storage is undefined");
  if (storage.data() == nullptr) return;  // zero bytes: nothing to protect
  if (storage.device().is_cuda()) {
    check_device(storage.device().index, "cuda::record_stream");
    device_caching_allocator(storage.device().index).record_stream(storage.data(), stream_handle);
    return;
  }
  CachingAllocator& pinned = pinned_caching_allocator();
  LOOM_CHECK(pinned.is_allocated(storage.data()), "cuda::record_stream: the ",
             storage.device(), " storage at ", storage.data(),
             " is not from loom's pinned allocator (use cuda::pinned_empty)");
  pinned.record_stream(storage.data(), stream_handle);
}

void keep_stream_pool(int device, uint64_t stream_handle) {
  check_device(device, "cuda::keep_stream_pool");
  device_caching_allocator(device).keep_pool(stream_handle);
}

void release_stream_pool(int device, uint64_t stream_handle) {
  check_device(device, "cuda::release_stream_pool");
  device_caching_allocator(device).release_pool(stream_handle);
}

void begin_allocator_capture(int device) {
  check_device(device, "cuda::begin_allocator_capture");
  device_caching_allocator(device).begin_capture();
  pinned_caching_allocator().begin_capture();
}

void end_allocator_capture(int device) {
  check_device(device, "cuda::end_allocator_capture");
  device_caching_allocator(device).end_capture();
  pinned_caching_allocator().end_capture();
}

Allocator& pinned_allocator() {
  LOOM_CHECK(is_available(), "cuda::pinned_allocator: pinned memory needs a CUDA device, and "
             "none is visible");
  static PinnedAllocator* allocator = new PinnedAllocator();
  return *allocator;
}

CachingAllocatorStats pinned_memory_stats() {
  if (!is_available()) return {};
  return pinned_caching_allocator().stats();
}

bool is_pinned(const void* ptr) { return pointer_is_pinned(ptr); }

bool from_pinned_allocator(const Storage& storage) {
  return storage.defined() && storage.device().is_cpu() && storage.data() != nullptr &&
         is_available() && pinned_caching_allocator().is_allocated(storage.data());
}

#endif  // LOOM_WITH_CUDA (without it, tensor/CudaRuntime.cpp has the stubs)

int64_t memory_allocated(int device) { return memory_stats(device).allocated_bytes; }
int64_t memory_reserved(int device) { return memory_stats(device).reserved_bytes; }
int64_t max_memory_allocated(int device) { return memory_stats(device).peak_allocated_bytes; }

Tensor pinned_empty(IntList sizes, DType dtype) {
  int64_t numel = 1;
  for (int64_t s : sizes) {
    LOOM_CHECK(s >= 0, "cuda::pinned_empty: sizes must be >= 0, got ", s);
    numel *= s;
  }
  DataPtr mem = pinned_allocator().allocate(static_cast<size_t>(numel) * element_size(dtype),
                                            Device(kCPU));
  return from_blob(mem.data, std::move(sizes), TensorOptions(dtype), std::move(mem.deleter));
}

}  // namespace cuda
}  // namespace loom
