// Small launch helpers every .cu file of tensor/cuda shares: the stream
// handles loom passes around (a cudaStream_t as an integer, 0 for the legacy
// default stream) back as a cudaStream_t, and a grid size for a number of
// work items (at least 1, at most 65535 blocks; kernels loop over the rest).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace loom {
namespace cuda {

inline cudaStream_t as_stream(uint64_t id) { return reinterpret_cast<cudaStream_t>(id); }

inline int grid_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(work, 65535)));
}

}  // namespace cuda
}  // namespace loom
