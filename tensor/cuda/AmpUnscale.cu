// native::amp_unscale_ on CUDA (AmpUnscale.h): a multi-tensor kernel, as
// PyTorch's _amp_foreach_non_finite_check_and_unscale_.  Each block takes
// one 64K-element chunk of one gradient (TensorChunks.cuh); each element is
// widened to float (double for double), checked, multiplied by the scale's
// inverse read from device memory, and rounded back.  A block
// that saw an inf or NaN writes 1 to found_inf (every writer writes the same
// value, so the race is benign); nothing else touches it.
#include <cuda_runtime.h>

#include <algorithm>

#include "tensor/CudaRuntime.h"
#include "tensor/DType.h"
#include "tensor/cuda/AmpUnscale.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/TensorChunks.cuh"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxListTensors = 48;

// One launch's gradients and blocks (TensorChunks.cuh), ~2.4 KB of kernel
// arguments.
struct UnscaleList {
  void* grads[kMaxListTensors];
  int64_t numels[kMaxListTensors];
  ChunkMap map;
};

template <typename T>
__global__ void unscale_kernel(UnscaleList list, float* found_inf, const float* inv_scale) {
  using O = compute_type_t<T>;  // float, double for double
  const BlockRange r = block_range(list.map, list.numels);
  T* g = static_cast<T*>(list.grads[r.slot]);
  const float inv = *inv_scale;
  bool bad = false;
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    const O v = static_cast<O>(g[i]);
    bad = bad || !isfinite(v);
    if (inv != 1.0f) g[i] = static_cast<T>(v * static_cast<O>(inv));
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

template <typename T>
void launch(int count, void* const* grads, const int64_t* numels, float* found_inf,
            const float* inv_scale, cudaStream_t stream) {
  UnscaleList list{};
  for_each_chunk_list(
      count, numels, kMaxListTensors, list.map,
      [&](int slot, int k) {
        list.grads[slot] = grads[k];
        list.numels[slot] = numels[k];
      },
      [&](int blocks) {
        unscale_kernel<T><<<blocks, kThreads, 0, stream>>>(list, found_inf, inv_scale);
        LOOM_CUDA_CHECK(cudaGetLastError());
      });
}

}  // namespace

void amp_unscale(DType dtype, int count, void* const* grads, const int64_t* numels,
                 float* found_inf, const float* inv_scale, int device, uint64_t stream) {
  if (count == 0) return;
  DeviceGuard guard(device);
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  dispatch_all_floating(dtype, "amp_unscale_", [&](auto tag) {
    launch<typename decltype(tag)::type>(count, grads, numels, found_inf, inv_scale, s);
  });
}

}  // namespace cuda
}  // namespace loom
