// Storage: a reference-counted block of device memory shared by a tensor and
// all of its views.  Copying a Storage copies the handle, never the bytes.
#pragma once

#include <cstddef>
#include <memory>

#include "tensor/Allocator.h"
#include "tensor/Device.h"

namespace loom {

class Storage {
 public:
  Storage() = default;
  // Allocates nbytes on `device` through that device's allocator.
  Storage(size_t nbytes, Device device);
  // Wraps memory the caller owns; `deleter` (may be empty) runs when the last
  // handle goes away.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);

  void* data() const { return impl_ ? impl_->ptr.data : nullptr; }
  size_t nbytes() const { return impl_ ? impl_->nbytes : 0; }
  Device device() const { return impl_ ? impl_->device : Device(); }
  bool defined() const { return impl_ != nullptr; }
  // True when both handles share the same memory block.
  bool is_alias_of(const Storage& other) const { return impl_ == other.impl_; }
  long use_count() const { return impl_.use_count(); }

 private:
  struct Impl {
    DataPtr ptr;
    size_t nbytes = 0;
    Device device;
    ~Impl() {
      if (ptr.deleter) ptr.deleter(ptr.data);
    }
  };
  std::shared_ptr<Impl> impl_;
};

}  // namespace loom
