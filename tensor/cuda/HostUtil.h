// Small helpers the CUDA host files (tensor/cuda/*.cpp) share to hand a
// Tensor to a raw launcher: its device index, the stream work for it is
// queued on, and its data as a typed pointer (null when undefined).
#pragma once

#include <cstdint>

#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/Tensor.h"

namespace loom {
namespace cuda {

inline int device_of(const Tensor& t) { return t.device().index; }
inline uint64_t stream_of(const Tensor& t) { return current_stream_handle(t.device().index); }

template <typename T = void>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// Scratch space of n doubles on like's device, from the caching allocator
// (released in stream order).
inline Tensor scratch_doubles(const Tensor& like, int64_t n) {
  return empty({n}, TensorOptions(kFloat64).device(like.device()));
}

}  // namespace cuda
}  // namespace loom
