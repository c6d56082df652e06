// Allocator: where Storage gets its bytes.  One allocator per device type;
// the CUDA backend registers a caching allocator for kCUDA.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tensor/Device.h"

namespace loom {

// Memory owned through a deleter.  `data` may be null for zero bytes.
struct DataPtr {
  void* data = nullptr;
  std::function<void(void*)> deleter;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns nbytes of memory on `device`, 64-byte aligned.  Throws loom::Error
  // when the memory cannot be had.
  virtual DataPtr allocate(size_t nbytes, Device device) = 0;
};

// The allocator for a device type: for kCUDA the caching allocator of
// tensor/CudaMemory.h unless set_allocator replaced it.  Throws for CUDA when
// loom was built without it.
Allocator& allocator_for(DeviceType type);
// Replaces the allocator of a device type (the CUDA backend calls this).
void set_allocator(DeviceType type, Allocator* allocator);

}  // namespace loom
