// loom::cuda memory: the caching allocator for CUDA devices and pinned
// (page-locked) host memory, in plain C++ (no CUDA types), so every build can
// include it.
//
// Device memory: one CachingAllocator (tensor/CachingAllocator.h) per GPU,
// backed by cudaMalloc/cudaFree and cudaEvent* (tensor/cuda/Memory.cu).  It
// is what Storage uses for kCUDA: allocator_for(kCUDA) registers it on first
// use (set_allocator).  Blocks are cached per stream, the allocating stream
// being the device's current stream (cuda::current_stream_handle).
//
// Pinned memory: page-locked host memory (cudaHostAlloc), cached the same way,
// so host<->device copies from it can run asynchronously (to(cuda,
// non_blocking=true)) and DataLoader(pin_memory) can fill batches in it.  A
// pinned tensor is an ordinary CPU tensor (device cpu) whose storage is
// pinned.
//
// Built without CUDA, the queries report nothing and everything else throws
// loom::Error("... loom was built without CUDA ...").
#pragma once

#include <cstdint>

#include "tensor/Allocator.h"
#include "tensor/CachingAllocator.h"
#include "tensor/DType.h"
#include "tensor/Tensor.h"

namespace loom {
namespace cuda {

// The caching device allocator (the one allocator_for(kCUDA) returns).
// Throws loom::Error when loom was built without CUDA.  Its allocate() throws
// for an invalid device index, and when the device is out of memory (after
// emptying the cache and retrying once) with a message naming the device,
// the size asked for, and what the cache holds allocated and reserved.
Allocator& device_allocator();

// Counters of the caching allocator of `device` (see CachingAllocatorStats).
// Throws loom::Error for an invalid device index.
CachingAllocatorStats memory_stats(int device);
// Bytes in allocated blocks / in segments held, on `device`.
int64_t memory_allocated(int device);
int64_t memory_reserved(int device);
int64_t max_memory_allocated(int device);
// Sets the peak counters of `device` to the current values.
void reset_peak_memory_stats(int device);
// Returns every cached, wholly free segment of every device (and of pinned
// memory) to the driver, after waiting for deferred frees.  Tensors stay
// valid.  A no-op without CUDA.
void empty_cache();
// False when LOOM_CUDA_NO_CACHING is set (not empty, not "0"; PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING): device memory is then not cached, one
// cudaMalloc per block, freed at once, so a memory checker
// (compute-sanitizer, the CUDA emulator's guard pages) sees each tensor's
// own bounds.  Read once.  True without CUDA.
bool device_memory_cached();

// Marks `storage` (a CUDA tensor's memory, or pinned host memory) as used by
// work queued on `stream_handle` (a cudaStream_t as an integer, 0 for the
// legacy default stream), so its memory is not reused before that work, as
// queued when the storage is freed, has finished.  Throws loom::Error for a
// storage that is not from loom's CUDA or pinned allocator.
void record_stream(const Storage& storage, uint64_t stream_handle);

// Keeps the free memory of `device`'s pool for stream_handle out of
// empty_cache() and the out-of-memory retry until released (counted), for a
// captured graph whose replays use it (tensor/CudaGraph.h).
void keep_stream_pool(int device, uint64_t stream_handle);
void release_stream_pool(int device, uint64_t stream_handle);

// A graph capture on `device` starts / ends (counted): until it ends,
// `device`'s allocator and the pinned one make no event call and return no
// memory to CUDA (CachingAllocator::begin_capture says why).
void begin_allocator_capture(int device);
void end_allocator_capture(int device);

// The pinned host allocator (cudaHostAlloc, cached).  Throws loom::Error
// without CUDA or without a visible device.
Allocator& pinned_allocator();
// Counters of the pinned allocator.
CachingAllocatorStats pinned_memory_stats();
// True when ptr points into page-locked host memory known to the CUDA driver
// (loom's pinned allocator, or cudaHostAlloc/cudaHostRegister elsewhere).
// False without CUDA or without a device.  Never throws.
bool is_pinned(const void* ptr);
// True when `storage` is a block of loom's pinned allocator (what
// record_stream accepts for host memory).  Never throws.
bool from_pinned_allocator(const Storage& storage);
// An uninitialised contiguous CPU tensor of `sizes` and `dtype` in pinned
// memory.  Throws loom::Error without CUDA or without a visible device.
Tensor pinned_empty(IntList sizes, DType dtype = kFloat32);

}  // namespace cuda
}  // namespace loom
