// The build-independent part of loom::cuda's runtime (argument checks, the
// DeviceGuard) and, without CUDA, the stubs: the one place a build without
// the toolkit gets them.  With CUDA (LOOM_WITH_CUDA) the driver queries live
// in tensor/cuda/Runtime.cu, streams, events, copies and graphs in the other
// .cu files, the allocators in tensor/CudaMemory.cpp; without it this file
// supplies the same signatures, so callers never need #ifdefs: queries say
// "no device" and everything that needs one throws loom::Error.  The ops
// need no stubs at all: their CUDA dispatch slots stay empty
// (tensor/native/DispatchStub.h).
#include "tensor/CudaRuntime.h"

#include "tensor/CudaMemory.h"
#include "tensor/Error.h"
#include "tensor/cuda/Copy.h"
#include "tensor/cuda/Graph.h"
#include "tensor/cuda/StreamEvent.h"

namespace loom {
namespace cuda {

namespace {
constexpr const char* kNoCuda =
    "loom was built without CUDA (no toolkit found at build time, or LOOM_DISABLE_CUDA=1)";
}  // namespace

void check_device(int device, const char* who) {
  LOOM_CHECK(built_with_cuda(), who, ": CUDA device ", device, " is not available: ", kNoCuda);
  const int n = device_count();
  LOOM_CHECK(n > 0, who, ": CUDA device ", device,
             " is not available: no CUDA device is visible (no GPU, no driver, or "
             "CUDA_VISIBLE_DEVICES hides them)");
  LOOM_CHECK(device >= 0 && device < n, who, ": invalid CUDA device index ", device, ": ", n,
             " CUDA device", n == 1 ? " is" : "s are", " visible (valid indices 0..", n - 1,
             ")");
}

// current_stream_handle lives with the streams, in tensor/Stream.cpp.

DeviceGuard::DeviceGuard(int device) {
  check_device(device, "cuda::DeviceGuard");
  original_ = current_device();
  device_ = device;
  if (device_ != original_) set_device(device_);
}

DeviceGuard::~DeviceGuard() {
  if (device_ == original_) return;
  try {
    set_device(original_);
  } catch (...) {
    // A destructor must not throw; the device was valid when the guard began.
  }
}

#ifdef LOOM_WITH_CUDA

bool built_with_cuda() { return true; }

#else

bool built_with_cuda() { return false; }
int device_count() { return 0; }
bool is_available() { return false; }

DeviceProperties get_device_properties(int device) {
  check_device(device, "cuda::get_device_properties");
  return {};
}
MemoryInfo memory_info(int device) {
  check_device(device, "cuda::memory_info");
  return {};
}
int current_device() { LOOM_FAIL("cuda::current_device: ", kNoCuda); }
void set_device(int device) { check_device(device, "cuda::set_device"); }
void synchronize(int device) { check_device(device < 0 ? 0 : device, "cuda::synchronize"); }

void memcpy_async(void*, const void*, size_t, int, uint64_t) {
  LOOM_FAIL("cuda::memcpy_async: ", kNoCuda);
}
void stream_synchronize(int, uint64_t) { LOOM_FAIL("cuda::stream_synchronize: ", kNoCuda); }
void strided_copy(void*, const int64_t*, const void*, const int64_t*, const int64_t*, int,
                  size_t, int, uint64_t) {
  LOOM_FAIL("cuda::strided_copy: ", kNoCuda);
}
void strided_fill(void*, const int64_t*, const int64_t*, int, size_t, const void*, int,
                  uint64_t) {
  LOOM_FAIL("cuda::strided_fill: ", kNoCuda);
}

void stream_priority_range(int, int*, int*) { LOOM_FAIL("cuda::stream_priority_range: ", kNoCuda); }
uint64_t stream_create(int, int) { LOOM_FAIL("cuda::stream_create: ", kNoCuda); }
bool stream_query(int, uint64_t) { LOOM_FAIL("cuda::stream_query: ", kNoCuda); }
void stream_wait_event(int, uint64_t, void*) { LOOM_FAIL("cuda::stream_wait_event: ", kNoCuda); }
void* event_create(int, bool) { LOOM_FAIL("cuda::event_create: ", kNoCuda); }
void event_destroy(void*) noexcept {}
void event_record(void*, int, uint64_t) { LOOM_FAIL("cuda::event_record: ", kNoCuda); }
bool event_query(void*) { LOOM_FAIL("cuda::event_query: ", kNoCuda); }
void event_synchronize(void*) { LOOM_FAIL("cuda::event_synchronize: ", kNoCuda); }
double event_elapsed_ms(void*, void*) { LOOM_FAIL("cuda::event_elapsed_ms: ", kNoCuda); }
void sleep_cycles(int64_t, int, uint64_t) { LOOM_FAIL("cuda::sleep_cycles: ", kNoCuda); }

void graph_capture_begin(int, uint64_t, bool) { LOOM_FAIL("cuda::Graph: ", kNoCuda); }
void* graph_capture_end(int, uint64_t) { LOOM_FAIL("cuda::Graph: ", kNoCuda); }
void graph_launch(void*, int, uint64_t) { LOOM_FAIL("cuda::Graph: ", kNoCuda); }
void graph_exec_destroy(void*) noexcept {}
bool stream_is_capturing(int, uint64_t) { return false; }

// The allocators and memory statistics (tensor/CudaMemory.h).
Allocator& device_allocator() { LOOM_FAIL("no CUDA allocator: ", kNoCuda); }
CachingAllocatorStats memory_stats(int device) {
  check_device(device, "cuda::memory_stats");
  return {};
}
void reset_peak_memory_stats(int device) { check_device(device, "cuda::reset_peak_memory_stats"); }
void empty_cache() {}
bool device_memory_cached() { return true; }
void record_stream(const Storage&, uint64_t) { LOOM_FAIL("cuda::record_stream: ", kNoCuda); }
void keep_stream_pool(int, uint64_t) { LOOM_FAIL("cuda::keep_stream_pool: ", kNoCuda); }
void release_stream_pool(int, uint64_t) { LOOM_FAIL("cuda::release_stream_pool: ", kNoCuda); }
void begin_allocator_capture(int) { LOOM_FAIL("cuda::begin_allocator_capture: ", kNoCuda); }
void end_allocator_capture(int) { LOOM_FAIL("cuda::end_allocator_capture: ", kNoCuda); }
Allocator& pinned_allocator() { LOOM_FAIL("cuda::pinned_allocator: ", kNoCuda); }
CachingAllocatorStats pinned_memory_stats() { return {}; }
bool is_pinned(const void*) { return false; }
bool from_pinned_allocator(const Storage&) { return false; }

#endif  // LOOM_WITH_CUDA

}  // namespace cuda
}  // namespace loom
