// The CUDA backends of loom's caching allocators (tensor/CachingAllocator.h):
// device memory through cudaMalloc/cudaFree, pinned host memory through
// cudaHostAlloc/cudaFreeHost, and cudaEvent_t for deferred reuse.  Plain C++
// declarations, defined in Memory.cu; tensor/CudaMemory.cpp builds the public
// API (tensor/CudaMemory.h) on them.  Only for builds with LOOM_WITH_CUDA.
#pragma once

#include "tensor/CachingAllocator.h"

namespace loom {
namespace cuda {

// The caching allocator of CUDA device `device` (created on first use, lives
// for the process).  The caller has checked the index.
CachingAllocator& device_caching_allocator(int device);
// The caching allocator of pinned host memory (one per process).  Its
// allocations use a StreamId no CUDA stream has (the host); record_stream
// takes real streams.
CachingAllocator& pinned_caching_allocator();
// Calls empty_cache() on every allocator created so far.
void empty_all_caches();
// True when the driver knows ptr as page-locked host memory.  Never throws.
bool pointer_is_pinned(const void* ptr);
// Whether device memory is cached (see tensor/CudaMemory.h, which declares it
// for every build).
bool device_memory_cached();

}  // namespace cuda
}  // namespace loom
