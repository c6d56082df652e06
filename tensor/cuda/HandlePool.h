// One library handle (cublasHandle_t, cudnnHandle_t) per (device, thread).
//
// cuBLAS and cuDNN handles are not thread-safe, are tied to the device that
// was current when they were created, and are expensive to create.  So each
// thread gets its own handle per device on first use, and gives it back to a
// process-wide pool when the thread exits, for the next thread to reuse
// (threads come and go: DataLoader workers, autograd device threads).  Handles
// are never destroyed: the pool lives until the process ends, as destroying a
// handle after the CUDA runtime has shut down can crash.
//
// Plain C++ (the handle type is a template argument), so the bookkeeping is
// tested without a GPU (tests/tensor/handle_pool_test.cpp).
#pragma once

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace loom {
namespace cuda {

template <typename Handle>
class HandlePool {
 public:
  // create(device) makes a new handle for `device` (which is current).
  explicit HandlePool(std::function<Handle(int)> create) : create_(std::move(create)) {}

  // A handle for `device` not in use by any thread: a returned one, else new.
  Handle acquire(int device) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (device < static_cast<int>(free_.size()) && !free_[device].empty()) {
        Handle h = free_[device].back();
        free_[device].pop_back();
        return h;
      }
      ++created_;
    }
    return create_(device);
  }
  void release(int device, Handle h) {
    std::lock_guard<std::mutex> lock(mu_);
    if (device >= static_cast<int>(free_.size())) free_.resize(device + 1);
    free_[device].push_back(h);
  }
  // Handles made so far / waiting for reuse (all devices).
  int created() const {
    std::lock_guard<std::mutex> lock(mu_);
    return created_;
  }
  int idle() const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& v : free_) n += static_cast<int>(v.size());
    return n;
  }

 private:
  std::function<Handle(int)> create_;
  mutable std::mutex mu_;
  std::vector<std::vector<Handle>> free_;  // per device
  int created_ = 0;
};

// The calling thread's handle for `device` from `pool`.  `pool` must outlive
// every thread that uses it (keep it in a never-destroyed static), and each
// Tag type names one pool: the thread-local slots are per (Tag, Handle).
template <typename Tag, typename Handle>
Handle thread_handle(HandlePool<Handle>& pool, int device) {
  struct Slots {
    HandlePool<Handle>* pool = nullptr;
    std::vector<std::pair<bool, Handle>> by_device;
    ~Slots() {
      for (size_t d = 0; d < by_device.size(); ++d)
        if (by_device[d].first) pool->release(static_cast<int>(d), by_device[d].second);
    }
  };
  thread_local Slots slots;
  slots.pool = &pool;
  if (device >= static_cast<int>(slots.by_device.size()))
    slots.by_device.resize(device + 1, {false, Handle()});
  auto& slot = slots.by_device[device];
  if (!slot.first) slot = {true, pool.acquire(device)};
  return slot.second;
}

}  // namespace cuda
}  // namespace loom
