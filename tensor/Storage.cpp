#include "tensor/Storage.h"

namespace loom {

Storage::Storage(size_t nbytes, Device device) : impl_(std::make_shared<Impl>()) {
  impl_->ptr = allocator_for(device.type).allocate(nbytes, device);
  impl_->nbytes = nbytes;
  impl_->device = device;
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : impl_(std::make_shared<Impl>()) {
  impl_->ptr = {data, std::move(deleter)};
  impl_->nbytes = nbytes;
  impl_->device = device;
}

}  // namespace loom
