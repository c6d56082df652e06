#include "tensor/native/DispatchStub.h"

#include <cstdio>
#include <cstdlib>

#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"

namespace loom {
namespace native {

void missing_kernel(const char* op, DeviceType type) {
  if (type == DeviceType::kCUDA && !cuda::built_with_cuda())
    LOOM_FAIL(op, ": loom was built without CUDA (no toolkit found at build time, or "
              "LOOM_DISABLE_CUDA=1), so CUDA tensors cannot run; move them to the CPU with "
              ".to(kCPU)");
  LOOM_FAIL(op, " is not implemented for ", (type == DeviceType::kCUDA ? "CUDA" : "CPU"), " tensors");
}

void duplicate_kernel(const char* op, DeviceType type) {
  std::fprintf(stderr, "loom: two %s kernels registered for %s (a build error)\n", op,
               type == DeviceType::kCUDA ? "CUDA" : "CPU");
  std::abort();
}

}  // namespace native
}  // namespace loom
