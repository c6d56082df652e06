// CUDA copy primitives on raw pointers, for tensor/cuda/Copy.cpp: the
// byte copy between host and device (cudaMemcpyAsync) and one strided-copy
// kernel that makes any layout contiguous, or scatters into any layout.
// Plain C++ declarations; the kernels are in Copy.cu.  Without CUDA they are
// stubs that throw loom::Error (tensor/CudaRuntime.cpp).
//
// Every call queues work on stream `stream` (a cudaStream_t as an integer, 0
// for the legacy default stream) of CUDA device `device`, and returns
// without waiting unless it says so.  Throws loom::Error on any CUDA error.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom {
namespace cuda {

// The most dimensions strided_copy and strided_fill handle.
constexpr int kMaxCopyDims = 16;

// Copies nbytes from src to dst, each in host or device memory (unified
// addressing tells which).  From or to pageable host memory CUDA finishes
// the host side before returning; with pinned host memory the copy runs
// asynchronously: keep both buffers alive and unchanged until the stream
// gets past it.
void memcpy_async(void* dst, const void* src, size_t nbytes, int device, uint64_t stream);

// Blocks until all work queued so far on the stream has finished.
void stream_synchronize(int device, uint64_t stream);

// dst[index] = src[index] for every multi-index over sizes (ndim of them,
// ndim <= kMaxCopyDims); strides are in elements and may be 0 (broadcast
// source) or arbitrary (views).  dst and src are device memory on `device`,
// elements of element_size (1, 2, 4 or 8) bytes, and must not overlap.
void strided_copy(void* dst, const int64_t* dst_strides, const void* src,
                  const int64_t* src_strides, const int64_t* sizes, int ndim,
                  size_t element_size, int device, uint64_t stream);

// Writes the element_size bytes at `pattern` (host memory) into every element
// of the strided dst (device memory on `device`).
void strided_fill(void* dst, const int64_t* strides, const int64_t* sizes, int ndim,
                  size_t element_size, const void* pattern, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
