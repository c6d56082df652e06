// The CUDA side of loom::cuda's queries (tensor/CudaRuntime.h).
//
// cudaGetDeviceCount is the first CUDA call a process makes: without a driver
// (libcuda.so absent) or without a GPU it fails, which here means "no device",
// not an error, so a CUDA build runs its CPU paths on any machine.
#include "tensor/CudaRuntime.h"

#include <cuda_runtime.h>

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

}  // namespace cuda
}  // namespace loom
