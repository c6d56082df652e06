// Small launch helpers every .cu file of tensor/cuda shares: the stream
// handles loom passes around (a cudaStream_t as an integer, 0 for the legacy
// default stream) back as a cudaStream_t, grid sizes (at least 1, at most
// 65535 blocks; kernels loop over the rest), a device's SM count, and the
// grid-stride loop.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "tensor/cuda/Check.h"

namespace loom {
namespace cuda {

inline cudaStream_t as_stream(uint64_t id) { return reinterpret_cast<cudaStream_t>(id); }

// Blocks for `work` items, one item per block.
inline int grid_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(work, 65535)));
}

// Blocks of `threads` threads for n items, one item per thread.
inline int blocks_for(int64_t n, int threads) { return grid_for((n + threads - 1) / threads); }

// The number of SMs of `device`, asked once per device.
inline int multiprocessors(int device) {
  static std::atomic<int> cache[64] = {};
  const bool cached = device >= 0 && device < 64;
  int count = cached ? cache[device].load(std::memory_order_relaxed) : 0;
  if (count == 0) {
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    if (cached) cache[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

// for (i = this thread's first item; i < n; i += every thread of the grid)
#define LOOM_CUDA_GRID_STRIDE(i, n)                                                     \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace cuda
}  // namespace loom
