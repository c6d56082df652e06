#include "tensor/native/DispatchStub.h"

#include <cstdio>
#include <cstdlib>

#include "tensor/Error.h"

namespace loom {
namespace native {

void missing_kernel(const char* op, Device device) {
  // A build without CUDA, or a device that is not there, says so first.
  check_device_usable(device, op);
  LOOM_FAIL(op, " is not implemented for ", device.type == DeviceType::kCUDA ? "CUDA" : "CPU",
            " tensors (got a tensor on ", device.str(), ")");
}

namespace {
// Built during static initialisation (a function-local static, so ready
// whatever the order of the registering files).
std::vector<KernelRegistration>& registrations() {
  static auto* list = new std::vector<KernelRegistration>();  // never destroyed
  return *list;
}
}  // namespace

const std::vector<KernelRegistration>& kernel_registrations() { return registrations(); }

void note_kernel_registration(const char* op, DeviceType type, const void* slot) {
  registrations().push_back({op, type, slot});
}

void duplicate_kernel(const char* op, DeviceType type) {
  std::fprintf(stderr, "loom: two %s kernels registered for %s (a build error)\n", op,
               type == DeviceType::kCUDA ? "CUDA" : "CPU");
  std::abort();
}

}  // namespace native
}  // namespace loom
