// cuda::vector_add (see VectorAdd.h): the launcher copies host arrays to the
// device, runs a grid-stride kernel, and copies the sum back.
#include "tensor/cuda/VectorAdd.h"

#include <algorithm>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"

namespace loom {
namespace cuda {
namespace {

// out[i] = a[i] + b[i]; a grid-stride loop, so any n fits any grid.
__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = a[i] + b[i];
  }
}

// Device memory freed on scope exit, also when a check throws.
struct DeviceBuffer {
  float* ptr = nullptr;
  explicit DeviceBuffer(int64_t n) {
    LOOM_CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(n) * sizeof(float)));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

void vector_add(const float* a, const float* b, float* out, int64_t n, int device) {
  LOOM_CHECK(n >= 0, "cuda::vector_add: n must be >= 0, got ", n);
  LOOM_CHECK(device >= 0 && device < device_count(), "cuda::vector_add: no CUDA device ",
             device, " (", device_count(), " visible)");
  if (n == 0) return;
  LOOM_CHECK(a != nullptr && b != nullptr && out != nullptr,
             "cuda::vector_add: null pointer for ", n, " elements");
  LOOM_CUDA_CHECK(cudaSetDevice(device));
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  DeviceBuffer da(n), db(n), dout(n);  // (n,) each
  LOOM_CUDA_CHECK(cudaMemcpy(da.ptr, a, bytes, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemcpy(db.ptr, b, bytes, cudaMemcpyHostToDevice));
  const int threads = 256;
  const int64_t wanted = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(std::min<int64_t>(wanted, 65535));
  vector_add_kernel<<<blocks, threads>>>(da.ptr, db.ptr, dout.ptr, n);
  LOOM_CUDA_CHECK(cudaGetLastError());
  LOOM_CUDA_CHECK(cudaMemcpy(out, dout.ptr, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace cuda
}  // namespace loom
