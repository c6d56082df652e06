// CUDA dropout: one Philox4x32-10 call (Philox.h) per group of four elements,
// so each thread draws the words for its own elements and no generator state
// is shared or advanced on the device.  The keep test is an integer compare
// of a 32-bit word with p * 2^32 (as the CPU kernel does with its own hash),
// so the keep probability is 1 - p to within 2^-32.  The CPU draws its bits
// from splitmix64, so CPU and CUDA masks differ for one seed; both are
// deterministic for a generator state, which is what the backward and
// activation checkpointing need.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Dropout.h"
#include "tensor/cuda/Philox.h"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// x, out, mask: (n); thread q handles elements 4q .. 4q + 3.
template <typename T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ out, T* __restrict__ mask,
                               int64_t n, uint64_t threshold, T scale, uint64_t seed,
                               uint64_t offset) {
  const int64_t groups = (n + 3) / 4;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < groups;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const philox::Counter r = philox::draw(seed, offset, static_cast<uint64_t>(q));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * q + k;
      if (i < n) {
        const T keep = static_cast<uint64_t>(r.v[k]) >= threshold ? scale : T(0);
        mask[i] = keep;
        out[i] = x[i] * keep;
      }
    }
  }
}

}  // namespace

void dropout(DType dtype, const void* x, void* out, void* mask, int64_t n, double p,
             uint64_t seed, uint64_t offset, int device, uint64_t stream) {
  if (n == 0) return;
  DeviceGuard guard(device);
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const uint64_t threshold = static_cast<uint64_t>(std::ldexp(p, 32));
  const int64_t groups = (n + 3) / 4;
  const int blocks =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((groups + kThreads - 1) / kThreads,
                                                              65535)));
  dispatch_floating(dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    dropout_kernel<T><<<blocks, kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out),
                                                  static_cast<T*>(mask), n, threshold, scale,
                                                  seed, offset);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
