// loom::cuda: the CUDA device runtime in plain C++ (no CUDA types), so every
// file and every build (with or without the toolkit) can include it.
//
// Built with CUDA (the toolkit was found, LOOM_WITH_CUDA), these talk to the
// driver through the CUDA runtime (tensor/cuda/Runtime.cu).  Built without,
// tensor/CudaRuntime.cpp supplies stubs: the queries report no devices and
// everything that needs a device throws loom::Error("... loom was built
// without CUDA ...").  A binary built with CUDA still starts on a machine
// without a GPU or driver; it just sees no devices.
//
// Devices are named by their index among the visible ones (0 .. n-1, as
// CUDA_VISIBLE_DEVICES orders them).  The current device is per thread, as in
// the CUDA runtime: set_device on one thread does not move another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {
namespace cuda {

// True when loom was compiled with CUDA support (independent of any GPU).
bool built_with_cuda();
// Number of CUDA devices visible to this process (honours
// CUDA_VISIBLE_DEVICES); 0 without a driver, without a GPU, or when loom was
// built without CUDA.  Never throws.
int device_count();
// True when at least one CUDA device can be used.
bool is_available();

// Throws loom::Error unless `device` is a valid index (0 <= device <
// device_count()).  The message starts with `who`, names the index and how
// many devices are visible, or says that loom was built without CUDA.
void check_device(int device, const char* who);

// What get_device_properties reports about one GPU.
struct DeviceProperties {
  int index = 0;
  std::string name;             // e.g. "NVIDIA H100 80GB HBM3"
  size_t total_memory = 0;      // bytes of global memory
  int major = 0;                // compute capability major (9 for sm_90)
  int minor = 0;                // compute capability minor
  int multiprocessor_count = 0; // streaming multiprocessors (SMs)
};
// The properties of CUDA device `device`.  Throws loom::Error for a bad index.
DeviceProperties get_device_properties(int device);

// Free and total bytes of device memory as the driver sees them now (other
// processes' use included).  Throws loom::Error for a bad index.
struct MemoryInfo {
  size_t free = 0;
  size_t total = 0;
};
MemoryInfo memory_info(int device);

// This thread's current CUDA device (0 until set_device is called).  Throws
// loom::Error when no device is visible.
int current_device();
// Makes `device` this thread's current CUDA device.  Throws loom::Error for a
// bad index.
void set_device(int device);

// Blocks until all work queued on `device` (every stream) has finished;
// device < 0 means the current device.  Rethrows an asynchronous CUDA error
// as loom::Error.  Throws for a bad index.
void synchronize(int device = -1);

// The stream this thread queues CUDA work for `device` on, as an opaque
// handle: a cudaStream_t cast to an integer, 0 for the legacy default stream.
// It is current_stream(cuda:device).native_handle() (tensor/Stream.h): the
// innermost StreamGuard's stream for that device, else the stream whose
// closure this thread is running, else 0 (the default stream).  Every kernel
// launcher, copy and the caching allocator use it.  Defined in
// tensor/Stream.cpp; never throws (0 for a negative index).
uint64_t current_stream_handle(int device);

// Makes `device` current on this thread for the guard's lifetime, then
// restores the previous current device.  Cheap when it is already current.
// Throws loom::Error (from the constructor) for a bad index.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  // The device that was current before the guard, restored on destruction.
  int original_device() const { return original_; }

 private:
  int original_ = 0;
  int device_ = 0;
};

}  // namespace cuda
}  // namespace loom
