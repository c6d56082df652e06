// CUDA copy primitives (see Copy.h).  One grid-stride kernel per element
// width: each thread turns its linear index into a multi-index over `sizes`
// and reads/writes through the two stride vectors, so the same kernel
// gathers (strided -> contiguous), scatters (contiguous -> strided) and
// broadcasts (stride 0).  Values are moved as unsigned integers of the
// element's width: a copy never converts, so every dtype is bit-exact.
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Copy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"

namespace loom {
namespace cuda {
namespace {


// Passed by value to the kernels (kernel arguments live in constant memory).
struct Layout {
  int ndim = 0;
  int64_t sizes[kMaxCopyDims];
  int64_t dst_strides[kMaxCopyDims];
  int64_t src_strides[kMaxCopyDims];
};

template <typename T>
__global__ void strided_copy_kernel(T* __restrict__ dst, const T* __restrict__ src,
                                    Layout layout, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    int64_t rest = i, d = 0, s = 0;
    for (int k = layout.ndim - 1; k >= 0; --k) {
      const int64_t idx = rest % layout.sizes[k];
      rest /= layout.sizes[k];
      d += idx * layout.dst_strides[k];
      s += idx * layout.src_strides[k];
    }
    dst[d] = src[s];
  }
}

template <typename T>
__global__ void strided_fill_kernel(T* __restrict__ dst, T value, Layout layout, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    int64_t rest = i, d = 0;
    for (int k = layout.ndim - 1; k >= 0; --k) {
      const int64_t idx = rest % layout.sizes[k];
      rest /= layout.sizes[k];
      d += idx * layout.dst_strides[k];
    }
    dst[d] = value;
  }
}

Layout make_layout(const int64_t* sizes, const int64_t* dst_strides,
                   const int64_t* src_strides, int ndim, int64_t* numel) {
  LOOM_CHECK(ndim >= 0 && ndim <= kMaxCopyDims, "CUDA strided copy: ", ndim,
             " dimensions; at most ", kMaxCopyDims, " are supported");
  Layout layout;
  layout.ndim = ndim;
  *numel = 1;
  for (int k = 0; k < ndim; ++k) {
    layout.sizes[k] = sizes[k];
    layout.dst_strides[k] = dst_strides[k];
    layout.src_strides[k] = src_strides ? src_strides[k] : 0;
    *numel *= sizes[k];
  }
  return layout;
}

void launch_config(int64_t n, int* blocks, int* threads) {
  *threads = 256;
  *blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535));
}

}  // namespace

void memcpy_async(void* dst, const void* src, size_t nbytes, int device, uint64_t stream) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, as_stream(stream)));
}

void stream_synchronize(int device, uint64_t stream) {
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
}

void strided_copy(void* dst, const int64_t* dst_strides, const void* src,
                  const int64_t* src_strides, const int64_t* sizes, int ndim,
                  size_t element_size, int device, uint64_t stream) {
  int64_t n = 0;
  const Layout layout = make_layout(sizes, dst_strides, src_strides, ndim, &n);
  if (n == 0) return;
  DeviceGuard guard(device);
  int blocks = 0, threads = 0;
  launch_config(n, &blocks, &threads);
  cudaStream_t s = as_stream(stream);
  switch (element_size) {
    case 1:
      strided_copy_kernel<<<blocks, threads, 0, s>>>(
          static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), layout, n);
      break;
    case 2:
      strided_copy_kernel<<<blocks, threads, 0, s>>>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), layout, n);
      break;
    case 4:
      strided_copy_kernel<<<blocks, threads, 0, s>>>(
          static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), layout, n);
      break;
    case 8:
      strided_copy_kernel<<<blocks, threads, 0, s>>>(
          static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), layout, n);
      break;
    default:
      LOOM_FAIL("CUDA strided copy: unsupported element size ", element_size);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void strided_fill(void* dst, const int64_t* strides, const int64_t* sizes, int ndim,
                  size_t element_size, const void* pattern, int device, uint64_t stream) {
  int64_t n = 0;
  const Layout layout = make_layout(sizes, strides, nullptr, ndim, &n);
  if (n == 0) return;
  DeviceGuard guard(device);
  int blocks = 0, threads = 0;
  launch_config(n, &blocks, &threads);
  cudaStream_t s = as_stream(stream);
  switch (element_size) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, pattern, 1);
      strided_fill_kernel<<<blocks, threads, 0, s>>>(static_cast<uint8_t*>(dst), v, layout, n);
      break;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, pattern, 2);
      strided_fill_kernel<<<blocks, threads, 0, s>>>(static_cast<uint16_t*>(dst), v, layout, n);
      break;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, pattern, 4);
      strided_fill_kernel<<<blocks, threads, 0, s>>>(static_cast<uint32_t*>(dst), v, layout, n);
      break;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, pattern, 8);
      strided_fill_kernel<<<blocks, threads, 0, s>>>(static_cast<uint64_t*>(dst), v, layout, n);
      break;
    }
    default:
      LOOM_FAIL("CUDA strided fill: unsupported element size ", element_size);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
