// The elementwise loops every CUDA elementwise kernel is built from (nvcc only).
//
// map1/map2/map3 apply a functor f to one, two or three inputs and store the
// result in the output (operand 0 of the ElementwiseLayout, Elementwise.h):
//   - dense layouts (every operand contiguous, or one broadcast value) take a
//     grid-stride loop over packs of kVec elements, loaded and stored as one
//     aligned vector each; a broadcast operand is read once per pack, an
//     immediate one (a CPU scalar) from the kernel's arguments.  When a
//     pointer is not aligned to its pack the strided loop runs instead.
//   - any other layout takes a grid-stride loop that turns each linear index
//     into one offset per operand (sizes and strides come by value in the
//     layout, so the divisions read constant memory).
// Functors are small structs with a __device__ operator() (no extended
// lambdas: nvcc runs without --extended-lambda).  Launches go on the given
// stream after a DeviceGuard, then LOOM_CUDA_CHECK(cudaGetLastError()).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Elementwise.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/VectorAccess.cuh"

namespace loom {
namespace cuda {
namespace loops {

constexpr int kVec = 4;
constexpr int kThreads = 256;

using cuda::as_stream;

// kVec elements of T moved as one access (VectorAccess.cuh).
template <typename T>
using Pack = Vec<T, kVec>;

// Whether p is aligned to a whole pack.
template <typename T>
bool pack_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kVec) == 0;
}

// The value of immediate operand k.
template <typename T>
__device__ __forceinline__ T immediate_value(const ElementwiseLayout& l, int k) {
  T v;
  memcpy(&v, &l.immediate_bits[k], sizeof(T));
  return v;
}

// Operand k's element at offset `off` (its immediate when it has one).
template <typename T>
__device__ __forceinline__ T load_at(const ElementwiseLayout& l, int k, const T* p, int64_t off) {
  return l.immediate[k] ? immediate_value<T>(l, k) : p[off];
}

// Pack i of operand k, or kVec copies of its one value for a broadcast operand.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const ElementwiseLayout& l, int k, const T* p,
                                             int64_t i) {
  if (l.scalar[k]) {
    Pack<T> r;
    const T x = load_at(l, k, p, 0);
#pragma unroll
    for (int j = 0; j < kVec; ++j) r.v[j] = x;
    return r;
  }
  return reinterpret_cast<const Pack<T>*>(p)[i];
}

template <typename T>
__device__ __forceinline__ T load_one(const ElementwiseLayout& l, int k, const T* p, int64_t i) {
  return l.scalar[k] ? load_at(l, k, p, 0) : p[i];
}

// offs[k] = the element offset of linear index i in operand k.
template <int N>
__device__ __forceinline__ void offsets(const ElementwiseLayout& l, int64_t i, int64_t* offs) {
#pragma unroll
  for (int k = 0; k < N; ++k) offs[k] = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    const int64_t size = l.sizes[d];
    const int64_t idx = i % size;
    i /= size;
#pragma unroll
    for (int k = 0; k < N; ++k) offs[k] += idx * l.strides[k][d];
  }
}

#define LOOM_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---- kernels -----------------------------------------------------------------------

template <typename Out, typename A, typename F>
__global__ void dense1(ElementwiseLayout l, Out* out, const A* a, F f) {
  const int64_t packs = l.numel / kVec;
  LOOM_GRID_STRIDE(i, packs) {
    const Pack<A> pa = load_pack(l, 1, a, i);
    Pack<Out> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = f(pa.v[k]);
    reinterpret_cast<Pack<Out>*>(out)[i] = r;
  }
  LOOM_GRID_STRIDE(j, l.numel - packs * kVec) {
    const int64_t i = packs * kVec + j;
    out[i] = f(load_one(l, 1, a, i));
  }
}

template <typename Out, typename A, typename F>
__global__ void strided1(ElementwiseLayout l, Out* out, const A* a, F f) {
  LOOM_GRID_STRIDE(i, l.numel) {
    int64_t o[2];
    offsets<2>(l, i, o);
    out[o[0]] = f(load_at(l, 1, a, o[1]));
  }
}

template <typename Out, typename A, typename B, typename F>
__global__ void dense2(ElementwiseLayout l, Out* out, const A* a, const B* b, F f) {
  const int64_t packs = l.numel / kVec;
  LOOM_GRID_STRIDE(i, packs) {
    const Pack<A> pa = load_pack(l, 1, a, i);
    const Pack<B> pb = load_pack(l, 2, b, i);
    Pack<Out> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = f(pa.v[k], pb.v[k]);
    reinterpret_cast<Pack<Out>*>(out)[i] = r;
  }
  LOOM_GRID_STRIDE(j, l.numel - packs * kVec) {
    const int64_t i = packs * kVec + j;
    out[i] = f(load_one(l, 1, a, i), load_one(l, 2, b, i));
  }
}

template <typename Out, typename A, typename B, typename F>
__global__ void strided2(ElementwiseLayout l, Out* out, const A* a, const B* b, F f) {
  LOOM_GRID_STRIDE(i, l.numel) {
    int64_t o[3];
    offsets<3>(l, i, o);
    out[o[0]] = f(load_at(l, 1, a, o[1]), load_at(l, 2, b, o[2]));
  }
}

template <typename Out, typename A, typename B, typename C, typename F>
__global__ void dense3(ElementwiseLayout l, Out* out, const A* a, const B* b, const C* c, F f) {
  const int64_t packs = l.numel / kVec;
  LOOM_GRID_STRIDE(i, packs) {
    const Pack<A> pa = load_pack(l, 1, a, i);
    const Pack<B> pb = load_pack(l, 2, b, i);
    const Pack<C> pc = load_pack(l, 3, c, i);
    Pack<Out> r;
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = f(pa.v[k], pb.v[k], pc.v[k]);
    reinterpret_cast<Pack<Out>*>(out)[i] = r;
  }
  LOOM_GRID_STRIDE(j, l.numel - packs * kVec) {
    const int64_t i = packs * kVec + j;
    out[i] = f(load_one(l, 1, a, i), load_one(l, 2, b, i),
               load_one(l, 3, c, i));
  }
}

template <typename Out, typename A, typename B, typename C, typename F>
__global__ void strided3(ElementwiseLayout l, Out* out, const A* a, const B* b, const C* c,
                         F f) {
  LOOM_GRID_STRIDE(i, l.numel) {
    int64_t o[4];
    offsets<4>(l, i, o);
    out[o[0]] = f(load_at(l, 1, a, o[1]), load_at(l, 2, b, o[2]), load_at(l, 3, c, o[3]));
  }
}

#undef LOOM_GRID_STRIDE

// ---- launchers ---------------------------------------------------------------------

inline int blocks_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads,
                                                                  65535)));
}

// Whether the vectorised loop may run: a dense layout whose non-broadcast
// pointers are aligned to their packs.
inline bool use_dense(const ElementwiseLayout& l, std::initializer_list<bool> aligned) {
  if (!l.dense) return false;
  int k = 0;
  for (bool a : aligned) {
    if (!a && !l.scalar[k]) return false;
    ++k;
  }
  return true;
}

template <typename Out, typename A, typename F>
void map1(const ElementwiseLayout& l, void* out, const void* a, F f, int device,
          uint64_t stream) {
  if (l.numel == 0) return;
  DeviceGuard guard(device);
  Out* o = static_cast<Out*>(out);
  const A* pa = static_cast<const A*>(a);
  cudaStream_t s = as_stream(stream);
  if (use_dense(l, {pack_aligned<Out>(out), pack_aligned<A>(a)})) {
    dense1<Out, A, F><<<blocks_for(std::max<int64_t>(l.numel / kVec, 1)), kThreads, 0, s>>>(
        l, o, pa, f);
  } else {
    strided1<Out, A, F><<<blocks_for(l.numel), kThreads, 0, s>>>(l, o, pa, f);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
}

template <typename Out, typename A, typename B, typename F>
void map2(const ElementwiseLayout& l, void* out, const void* a, const void* b, F f, int device,
          uint64_t stream) {
  if (l.numel == 0) return;
  DeviceGuard guard(device);
  Out* o = static_cast<Out*>(out);
  const A* pa = static_cast<const A*>(a);
  const B* pb = static_cast<const B*>(b);
  cudaStream_t s = as_stream(stream);
  if (use_dense(l, {pack_aligned<Out>(out), pack_aligned<A>(a), pack_aligned<B>(b)})) {
    dense2<Out, A, B, F><<<blocks_for(std::max<int64_t>(l.numel / kVec, 1)), kThreads, 0, s>>>(
        l, o, pa, pb, f);
  } else {
    strided2<Out, A, B, F><<<blocks_for(l.numel), kThreads, 0, s>>>(l, o, pa, pb, f);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
}

template <typename Out, typename A, typename B, typename C, typename F>
void map3(const ElementwiseLayout& l, void* out, const void* a, const void* b, const void* c,
          F f, int device, uint64_t stream) {
  if (l.numel == 0) return;
  DeviceGuard guard(device);
  Out* o = static_cast<Out*>(out);
  const A* pa = static_cast<const A*>(a);
  const B* pb = static_cast<const B*>(b);
  const C* pc = static_cast<const C*>(c);
  cudaStream_t s = as_stream(stream);
  if (use_dense(l, {pack_aligned<Out>(out), pack_aligned<A>(a), pack_aligned<B>(b),
                    pack_aligned<C>(c)})) {
    dense3<Out, A, B, C, F>
        <<<blocks_for(std::max<int64_t>(l.numel / kVec, 1)), kThreads, 0, s>>>(l, o, pa, pb, pc,
                                                                              f);
  } else {
    strided3<Out, A, B, C, F><<<blocks_for(l.numel), kThreads, 0, s>>>(l, o, pa, pb, pc, f);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace loops
}  // namespace cuda
}  // namespace loom
