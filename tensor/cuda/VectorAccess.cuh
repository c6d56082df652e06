// V neighbouring elements of T moved as one access: the vector loads and
// stores of the elementwise loops (Loops.cuh), max pooling (Pooling.cu) and
// the channels-last batch norm (BatchNormChannelsLast.cu).  A group is
// aligned to its size up to 16 bytes, the widest access a thread makes
// (a wider group moves as several 16-byte accesses); each caller checks its
// pointers on the host before it picks a V above 1 (nvcc only).
#pragma once

#include <cuda_runtime.h>

namespace loom {
namespace cuda {

template <typename T, int V>
struct alignas(sizeof(T) * V < 16 ? sizeof(T) * V : 16) Vec {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Vec<T, V> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, V>*>(p);
}

template <typename T, int V>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, V>& v) {
  *reinterpret_cast<Vec<T, V>*>(p) = v;
}

}  // namespace cuda
}  // namespace loom
