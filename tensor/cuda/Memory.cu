// CUDA backends for CachingAllocator (see Memory.h).
//
// Events: cudaEventRecord needs the event and the stream on one device, and a
// pinned block may be used by streams of any device, so an event is created
// lazily at record time, on the recorded stream's device.  Stream id 0 (the
// legacy default stream) names no device by itself: for device memory it is
// the allocator's own device's, for pinned memory the current device's of the
// thread that frees the block.
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Memory.h"

#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"

namespace loom {
namespace cuda {
namespace {


// The device that runs work queued on `stream` (0: the legacy default stream
// of `legacy_device`, or of the current device when that is < 0).
int stream_device(cudaStream_t stream, int legacy_device) {
  if (stream == nullptr) return legacy_device >= 0 ? legacy_device : current_device();
  int device = 0;
  LOOM_CUDA_CHECK(cudaStreamGetDevice(stream, &device));
  return device;
}

struct LazyEvent {
  cudaEvent_t event = nullptr;
  int device = 0;
};

// Event handling shared by both backends.
class EventBackend : public CachingAllocatorBackend {
 public:
  explicit EventBackend(int legacy_device) : legacy_device_(legacy_device) {}
  void* create_event() override { return new LazyEvent(); }
  void destroy_event(void* e) override {
    auto* ev = static_cast<LazyEvent*>(e);
    if (ev->event != nullptr) {
      DeviceGuard guard(ev->device);
      LOOM_CUDA_CHECK(cudaEventDestroy(ev->event));
    }
    delete ev;
  }
  void record_event(void* e, StreamId stream) override {
    auto* ev = static_cast<LazyEvent*>(e);
    ev->device = stream_device(as_stream(stream), legacy_device_);
    DeviceGuard guard(ev->device);
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&ev->event, cudaEventDisableTiming));
    LOOM_CUDA_CHECK(cudaEventRecord(ev->event, as_stream(stream)));
  }
  bool query_event(void* e) override {
    auto* ev = static_cast<LazyEvent*>(e);
    if (ev->event == nullptr) return true;
    const cudaError_t status = cudaEventQuery(ev->event);
    if (status == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is an answer, not an error
      return false;
    }
    LOOM_CUDA_CHECK(status);
    return true;
  }
  void synchronize_event(void* e) override {
    auto* ev = static_cast<LazyEvent*>(e);
    if (ev->event != nullptr) LOOM_CUDA_CHECK(cudaEventSynchronize(ev->event));
  }

 private:
  int legacy_device_;  // whose legacy default stream id 0 means (-1: current)
};

class DeviceBackend final : public EventBackend {
 public:
  explicit DeviceBackend(int device) : EventBackend(device), device_(device) {}
  void* allocate_segment(size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    // A new segment while a graph is being captured (its private pool
    // growing): cudaMalloc is not a captured operation, and the segment
    // outlives the graph, so it is safe; relaxed mode says so to CUDA.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    LOOM_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t status = cudaMalloc(&p, bytes);
    LOOM_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;  // the cache decides whether to flush and retry
    }
    LOOM_CUDA_CHECK(status);
    return p;
  }
  void free_segment(void* ptr, size_t) override {
    DeviceGuard guard(device_);
    LOOM_CUDA_CHECK(cudaFree(ptr));
  }
  std::string describe_memory() override {
    size_t free = 0, total = 0;
    DeviceGuard guard(device_);
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return {};
    }
    return "the device has " + std::to_string(free >> 20) + " MiB free of " +
           std::to_string(total >> 20) + " MiB (all processes)";
  }

 private:
  int device_;
};

class PinnedBackend final : public EventBackend {
 public:
  PinnedBackend() : EventBackend(-1) {}
  void* allocate_segment(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    LOOM_CUDA_CHECK(status);
    return p;
  }
  void free_segment(void* ptr, size_t) override { LOOM_CUDA_CHECK(cudaFreeHost(ptr)); }
};

constexpr int kMaxDevices = 64;
std::mutex g_mutex;
std::array<CachingAllocator*, kMaxDevices> g_device{};  // leaked: live for the process
CachingAllocator* g_pinned = nullptr;

}  // namespace

bool device_memory_cached() {
  static const bool caching = [] {
    const char* v = std::getenv("LOOM_CUDA_NO_CACHING");
    return v == nullptr || std::string(v).empty() || std::string(v) == "0";
  }();
  return caching;
}

CachingAllocator& device_caching_allocator(int device) {
  LOOM_CHECK(device >= 0 && device < kMaxDevices, "CUDA allocator: device index ", device,
             " is out of range");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_device[device] == nullptr)
    g_device[device] = new CachingAllocator(std::make_unique<DeviceBackend>(device),
                                            "cuda:" + std::to_string(device),
                                            device_memory_cached());
  return *g_device[device];
}

CachingAllocator& pinned_caching_allocator() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_pinned == nullptr)
    g_pinned = new CachingAllocator(std::make_unique<PinnedBackend>(), "pinned host memory");
  return *g_pinned;
}

void empty_all_caches() {
  std::array<CachingAllocator*, kMaxDevices + 1> all{};
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (int i = 0; i < kMaxDevices; ++i) all[i] = g_device[i];
    all[kMaxDevices] = g_pinned;
  }
  for (CachingAllocator* a : all)
    if (a != nullptr) a->empty_cache();
}

bool pointer_is_pinned(const void* ptr) {
  if (ptr == nullptr || !is_available()) return false;
  cudaPointerAttributes attrs;
  if (cudaPointerGetAttributes(&attrs, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attrs.type == cudaMemoryTypeHost;
}

}  // namespace cuda
}  // namespace loom
