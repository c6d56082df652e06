// CUDA indexing kernels (see Index.h).  All are grid-stride loops over the
// elements they produce or consume, one thread per element:
//   - index_select and gather read through the index and write their own
//     output element, so no two threads write one place;
//   - index_add and scatter_add may hit one output element from many threads
//     (repeated indices), so they add with atomics: atomicAdd for float,
//     double (sm_60+), int32 and int64 (two's complement add on the unsigned
//     64-bit atomic), and a compare-and-swap on the aligned 32-bit word for
//     the one-byte dtypes (uint8 adds modulo 256, bool ors).  The word lies
//     inside the allocation, as device blocks are at least 512-byte aligned
//     and sized.
//   - find_bad_index keeps the lowest bad position with atomicMin, so the
//     error names the same index the CPU kernels would.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Index.h"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// ---- atomics ----------------------------------------------------------------------

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t* p, int32_t v) {
  atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v));
}
__device__ __forceinline__ void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// One byte inside its aligned 32-bit word.
__device__ __forceinline__ void atomic_add(uint8_t* p, uint8_t v) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
  const unsigned int shift = static_cast<unsigned int>(addr & 3) * 8;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int byte = ((assumed >> shift) + v) & 0xFFu;
    const unsigned int next = (assumed & ~(0xFFu << shift)) | (byte << shift);
    old = atomicCAS(word, assumed, next);
  } while (assumed != old);
}
__device__ __forceinline__ void atomic_add(bool* p, bool v) {
  if (!v) return;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
  atomicOr(word, 1u << (static_cast<unsigned int>(addr & 3) * 8));
}

// Unsigned integer of N bytes: copies move bits, never convert.
template <size_t N> struct Bits;
template <> struct Bits<1> { using type = uint8_t; };
template <> struct Bits<2> { using type = uint16_t; };
template <> struct Bits<4> { using type = uint32_t; };
template <> struct Bits<8> { using type = uint64_t; };

// ---- kernels ----------------------------------------------------------------------

__global__ void find_bad_kernel(const int64_t* __restrict__ idx, int64_t n, int64_t limit,
                                bool has_ignore, int64_t ignore,
                                unsigned long long* __restrict__ first_bad) {
  LOOM_CUDA_GRID_STRIDE(i, n) {
    const int64_t v = idx[i];
    if ((v < 0 || v >= limit) && !(has_ignore && v == ignore))
      atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

// verdict[1] <- the value at position verdict[0] (when there is one).
__global__ void fetch_bad_value(const int64_t* __restrict__ idx, int64_t* __restrict__ verdict) {
  const int64_t pos = verdict[0];
  verdict[1] = pos >= 0 ? idx[pos] : 0;
}

// self (outer, size, inner) -> out (outer, n, inner).
template <typename B>
__global__ void index_select_kernel(const B* __restrict__ self, B* __restrict__ out,
                                    const int64_t* __restrict__ idx, int64_t outer, int64_t size,
                                    int64_t n, int64_t inner) {
  const int64_t total = outer * n * inner;
  LOOM_CUDA_GRID_STRIDE(e, total) {
    const int64_t k = e % inner;
    const int64_t i = (e / inner) % n;
    const int64_t o = e / (inner * n);
    const int64_t v = idx[i];
    if (v < 0 || v >= size) continue;
    out[e] = self[(o * size + v) * inner + k];
  }
}

// out (outer, size, inner) += source (outer, n, inner).
template <typename T>
__global__ void index_add_kernel(T* __restrict__ out, const T* __restrict__ source,
                                 const int64_t* __restrict__ idx, int64_t outer, int64_t size,
                                 int64_t n, int64_t inner) {
  const int64_t total = outer * n * inner;
  LOOM_CUDA_GRID_STRIDE(e, total) {
    const int64_t k = e % inner;
    const int64_t i = (e / inner) % n;
    const int64_t o = e / (inner * n);
    const int64_t v = idx[i];
    if (v < 0 || v >= size) continue;
    atomic_add(out + (o * size + v) * inner + k, source[e]);
  }
}

// The offsets of position e (row-major over l.sizes) under strides a and b,
// with coordinate l.dim replaced by value = idx[e] in a.
__device__ __forceinline__ void line_offsets(const IndexLayout& l, int64_t e, const int64_t* idx,
                                             int64_t& off_a, int64_t& off_b, int64_t& value) {
  value = idx[e];
  off_a = 0;
  off_b = 0;
  int64_t rest = e;
  for (int d = l.ndim - 1; d >= 0; --d) {
    const int64_t coord = rest % l.sizes[d];
    rest /= l.sizes[d];
    off_a += (d == l.dim ? value : coord) * l.strides[d];
    off_b += coord * l.src_strides[d];
  }
}

template <typename B>
__global__ void gather_kernel(B* __restrict__ out, const B* __restrict__ self,
                              const int64_t* __restrict__ idx, IndexLayout l, int64_t numel,
                              int64_t limit) {
  LOOM_CUDA_GRID_STRIDE(e, numel) {
    int64_t off_self, unused, v;
    line_offsets(l, e, idx, off_self, unused, v);
    if (v < 0 || v >= limit) continue;
    out[e] = self[off_self];
  }
}

template <typename T>
__global__ void scatter_add_kernel(T* __restrict__ out, const T* __restrict__ src,
                                   const int64_t* __restrict__ idx, IndexLayout l, int64_t numel,
                                   int64_t limit) {
  LOOM_CUDA_GRID_STRIDE(e, numel) {
    int64_t off_out, off_src, v;
    line_offsets(l, e, idx, off_out, off_src, v);
    if (v < 0 || v >= limit) continue;
    atomic_add(out + off_out, src[off_src]);
  }
}


// Calls fn(Bits<N>) for element_size N.
template <typename Fn>
void dispatch_bits(size_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1: return fn(Bits<1>{});
    case 2: return fn(Bits<2>{});
    case 4: return fn(Bits<4>{});
    case 8: return fn(Bits<8>{});
  }
  LOOM_FAIL("CUDA indexing: unsupported element size ", element_size);
}

int64_t numel_of(const IndexLayout& l) {
  int64_t n = 1;
  for (int d = 0; d < l.ndim; ++d) n *= l.sizes[d];
  return n;
}

}  // namespace

void find_bad_index(const int64_t* idx, int64_t n, int64_t limit, bool has_ignore,
                    int64_t ignore, int64_t* verdict, int device, uint64_t stream) {
  DeviceGuard guard(device);
  cudaStream_t s = as_stream(stream);
  // All ones: -1 as int64, the largest value for the unsigned atomicMin.
  LOOM_CUDA_CHECK(cudaMemsetAsync(verdict, 0xFF, sizeof(int64_t), s));
  if (n > 0) {
    find_bad_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        idx, n, limit, has_ignore, ignore, reinterpret_cast<unsigned long long*>(verdict));
    LOOM_CUDA_CHECK(cudaGetLastError());
  }
  fetch_bad_value<<<1, 1, 0, s>>>(idx, verdict);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void index_select(size_t element_size, const void* self, void* out, const int64_t* idx,
                  int64_t outer, int64_t size, int64_t n, int64_t inner, int device,
                  uint64_t stream) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  DeviceGuard guard(device);
  dispatch_bits(element_size, [&](auto bits) {
    using B = typename decltype(bits)::type;
    index_select_kernel<B><<<blocks_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(
        static_cast<const B*>(self), static_cast<B*>(out), idx, outer, size, n, inner);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void index_add(DType dtype, void* out, const void* source, const int64_t* idx, int64_t outer,
               int64_t size, int64_t n, int64_t inner, int device, uint64_t stream) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  DeviceGuard guard(device);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_kernel<T><<<blocks_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(source), idx, outer, size, n, inner);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void gather(size_t element_size, void* out, const void* self, const int64_t* idx,
            const IndexLayout& l, int device, uint64_t stream) {
  const int64_t numel = numel_of(l);
  if (numel == 0) return;
  DeviceGuard guard(device);
  dispatch_bits(element_size, [&](auto bits) {
    using B = typename decltype(bits)::type;
    gather_kernel<B><<<blocks_for(numel, kThreads), kThreads, 0, as_stream(stream)>>>(
        static_cast<B*>(out), static_cast<const B*>(self), idx, l, numel, l.limit);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

void scatter_add(DType dtype, void* out, const void* src, const int64_t* idx,
                 const IndexLayout& l, int device, uint64_t stream) {
  const int64_t numel = numel_of(l);
  if (numel == 0) return;
  DeviceGuard guard(device);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_add_kernel<T><<<blocks_for(numel, kThreads), kThreads, 0, as_stream(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(src), idx, l, numel, l.limit);
  });
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
