#include "tensor/Allocator.h"

#include <atomic>

#include "tensor/CpuMemory.h"
#include "tensor/CudaMemory.h"
#include "tensor/Error.h"

namespace loom {
namespace {

std::atomic<Allocator*> g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(DeviceType type) {
  if (type == DeviceType::kCPU) {
    Allocator* a = g_allocators[0].load();
    return a ? *a : cpu::host_allocator();
  }
  Allocator* a = g_allocators[1].load();
  // The CUDA caching allocator registers itself on first use; without CUDA
  // this throws "no CUDA allocator: loom was built without CUDA ...".
  return a ? *a : cuda::device_allocator();
}

void set_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)].store(allocator);
}

}  // namespace loom
