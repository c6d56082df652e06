// loom::cpu memory: the caching allocator behind every CPU tensor.
//
// A training step frees and reallocates the same activations every
// iteration.  glibc serves large blocks with fresh mmap()s and gives them
// back to the kernel on free, so every page of every large activation is
// page-faulted (and zeroed by the kernel) again on each step: ~240,000 faults
// a ResNet-50 step.  The CPU allocator therefore keeps freed blocks, with the
// policy of the CUDA caching allocator (tensor/CachingAllocator.h: 512-byte
// rounding, a small pool of 2 MiB segments for requests <= 1 MiB, best fit,
// split and merge), over segments mmap()ed with transparent huge pages
// requested.  Memory goes back to the kernel only on empty_cache().
//
// CPU work has no streams to order reuse by: a block is freed when its last
// tensor is destroyed, after every kernel that used it has returned, so all
// blocks live in one pool.  Every function is thread-safe (CPU logical
// devices and DataLoader workers allocate concurrently), and fork() is safe
// (the allocator's lock is held across it).
//
// LOOM_CPU_ALLOCATOR=malloc switches the cache off (for comparison, or to let
// a memory checker see every block): blocks then come from aligned_alloc and
// the statistics count them the same way (reserved == allocated).  Any other
// value than "caching" (the default) or "malloc" is an error at the first
// CPU allocation.  Under AddressSanitizer, cached free blocks are poisoned, so
// a use after free of a tensor's memory is still reported.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/CachingAllocator.h"

namespace loom {

class Allocator;
namespace cpu {

// The allocator allocator_for(kCPU) returns unless set_allocator replaced it.
// Throws loom::Error (at first use) for a bad LOOM_CPU_ALLOCATOR.
Allocator& host_allocator();

// "caching" or "malloc": the mode chosen by LOOM_CPU_ALLOCATOR.
const std::string& allocator_mode();

// Counters of the CPU allocator (see CachingAllocatorStats).
CachingAllocatorStats memory_stats();
// Bytes in blocks handed out / in segments held / the peak of the former
// since the start or the last reset_peak_memory_stats().
int64_t memory_allocated();
int64_t memory_reserved();
int64_t max_memory_allocated();
// Sets the peak counters to the current values.
void reset_peak_memory_stats();
// Returns every cached, wholly free segment to the kernel.  Tensors stay
// valid.  A no-op in malloc mode.
void empty_cache();

}  // namespace cpu
}  // namespace loom
