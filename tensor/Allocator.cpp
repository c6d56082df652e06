#include "tensor/Allocator.h"

#include <malloc.h>

#include <cstdlib>

#include <atomic>

#include "tensor/CudaMemory.h"
#include "tensor/Error.h"

namespace loom {
namespace {

class CpuAllocator final : public Allocator {
 public:
  // Training steps free and reallocate the same large activations every
  // iteration.  glibc would serve them with fresh mmap()s (or trim them back
  // to the OS) and page-fault every page in again, ~10% of a ConvNet step;
  // keeping freed blocks up to 32 MiB in the heap lets them be reused.
  CpuAllocator() {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
  DataPtr allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return {nullptr, [](void*) {}};
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    LOOM_CHECK(p != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
    return {p, [](void* q) { std::free(q); }};
  }
};

std::atomic<Allocator*> g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(DeviceType type) {
  static CpuAllocator cpu;
  if (type == DeviceType::kCPU) {
    Allocator* a = g_allocators[0].load();
    return a ? *a : cpu;
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
