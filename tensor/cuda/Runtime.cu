// The CUDA side of loom::cuda's device runtime (tensor/CudaRuntime.h).
//
// cudaGetDeviceCount is the first CUDA call a process makes: without a driver
// (libcuda.so absent) or without a GPU it fails, which here means "no device",
// not an error, so a CUDA build runs its CPU paths on any machine.  Every
// other call goes through LOOM_CUDA_CHECK and throws loom::Error on failure.
#include "tensor/CudaRuntime.h"

#include <cuda_runtime.h>

#include "tensor/DeferredChecks.h"
#include "tensor/cuda/Check.h"

namespace loom {
namespace cuda {

int device_count() {
  // The visible devices cannot change within a process; ask the driver once.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver / no device" error
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

DeviceProperties get_device_properties(int device) {
  check_device(device, "cuda::get_device_properties");
  cudaDeviceProp prop;
  LOOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceProperties out;
  out.index = device;
  out.name = prop.name;
  out.total_memory = prop.totalGlobalMem;
  out.major = prop.major;
  out.minor = prop.minor;
  out.multiprocessor_count = prop.multiProcessorCount;
  return out;
}

MemoryInfo memory_info(int device) {
  check_device(device, "cuda::memory_info");
  DeviceGuard guard(device);
  MemoryInfo info;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
  return info;
}

int current_device() {
  LOOM_CHECK(is_available(), "cuda::current_device: no CUDA device is visible");
  int device = 0;
  LOOM_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) {
  check_device(device, "cuda::set_device");
  LOOM_CUDA_CHECK(cudaSetDevice(device));
}

void synchronize(int device) {
  if (device < 0) device = is_available() ? current_device() : 0;
  check_device(device, "cuda::synchronize");
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  raise_deferred_errors();  // every check on this device has its verdict now
}

}  // namespace cuda
}  // namespace loom
