// DispatchStub: one kernel slot per device type, in the spirit of ATen's
// DispatchStub.
//
// A native op declares its kernel's signature and slot once, in its
// tensor/native/ header, and defines the slot in its .cpp:
//
//   using UnaryKernel = void (*)(UnaryOp, const Tensor& out, const Tensor& in);
//   extern DispatchStub<UnaryKernel> unary_stub;        // Unary.h
//   DispatchStub<UnaryKernel> unary_stub("unary");      // Unary.cpp
//
// Each backend folder fills the slot for its device type at static
// initialisation, from the file that defines the kernel:
//
//   static const RegisterKernel reg(unary_stub, kCPU, &unary_kernel);  // cpu/
//   static const RegisterKernel reg(unary_stub, kCUDA, &unary_kernel); // cuda/
//
// and the op calls the slot for the tensor's device:
//
//   unary_stub(out.device(), op, out, in);
//
// An empty slot throws from one place (missing_kernel below): "<op> is not
// implemented for <device>", or, for CUDA in a build without the toolkit,
// that loom was built without CUDA.  So native/ never branches on the device
// and never includes a backend header, and a build without CUDA needs no
// stubs: the CUDA files are simply not compiled.
//
// Order of initialisation: a slot is constant-initialised (constexpr
// constructor, trivial destructor), so it is ready before any backend's
// dynamic initialiser registers into it, whatever the link order.  The
// libraries holding registrations link with alwayslink, so the linker keeps
// files that nothing references by name.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/Device.h"
#include "tensor/native/KernelProfile.h"

namespace loom {
namespace native {

// Throws loom::Error for a call to an empty slot: for a CUDA device that
// cannot be used, why ("<op>: CUDA device 0 is not available: loom was built
// without CUDA ..."), else "<op> is not implemented for CUDA tensors".
[[noreturn]] void missing_kernel(const char* op, Device device);
// Aborts with a message naming the op: a slot filled twice is a build error
// (two backends registering one kernel), found at start-up.
[[noreturn]] void duplicate_kernel(const char* op, DeviceType type);

// Every registration so far (slot name, device type), in registration order:
// for tests that check which slots a backend fills (dispatch_coverage_test).
struct KernelRegistration {
  std::string op;
  DeviceType type;
  const void* slot;  // the DispatchStub (two slots may share an op name)
};
const std::vector<KernelRegistration>& kernel_registrations();
void note_kernel_registration(const char* op, DeviceType type, const void* slot);

template <typename Fn>
class DispatchStub;

template <typename Ret, typename... Args>
class DispatchStub<Ret (*)(Args...)> {
 public:
  using Fn = Ret (*)(Args...);

  constexpr explicit DispatchStub(const char* name) : name_(name) {}
  DispatchStub(const DispatchStub&) = delete;
  DispatchStub& operator=(const DispatchStub&) = delete;

  const char* name() const { return name_; }

  // Fills the slot of `type`; called once per device type, at static
  // initialisation (through RegisterKernel).
  void set(DeviceType type, Fn fn) {
    Fn& slot = type == DeviceType::kCUDA ? cuda_ : cpu_;
    if (slot != nullptr && slot != fn) duplicate_kernel(name_, type);
    slot = fn;
  }

  // The kernel for `device`'s type; throws when none is registered.
  Fn get(Device device) const {
    const Fn fn = device.type == DeviceType::kCUDA ? cuda_ : cpu_;
    if (fn == nullptr) missing_kernel(name_, device);
    return fn;
  }

  bool has(DeviceType type) const { return (type == DeviceType::kCUDA ? cuda_ : cpu_) != nullptr; }

  // For capability slots ("does this device's kernel take bfloat16?"): the
  // kernel's answer where the slot of `device`'s type is filled, else
  // `absent`.  Not timed by the kernel profile.
  template <typename Absent, typename... A>
  Ret answer_or(const Absent& absent, Device device, A&&... args) const {
    return has(device.type) ? get(device)(std::forward<A>(args)...) : Ret(absent);
  }

  // Runs the kernel of `device`'s type (timed while a kernel profile runs).
  template <typename... A>
  Ret operator()(Device device, A&&... args) const {
    if (!kernel_profiling()) return get(device)(std::forward<A>(args)...);
    KernelTimer timer(name_, device);
    return get(device)(std::forward<A>(args)...);
  }

 private:
  const char* name_;
  Fn cpu_ = nullptr;
  Fn cuda_ = nullptr;
};

// Registers a kernel into a slot when constructed; a backend defines one per
// kernel as a file-level static:
//   static const RegisterKernel reg_unary(unary_stub, kCPU, &unary_kernel);
class RegisterKernel {
 public:
  template <typename Fn>
  RegisterKernel(DispatchStub<Fn>& stub, DeviceType type, typename DispatchStub<Fn>::Fn fn) {
    stub.set(type, fn);
    note_kernel_registration(stub.name(), type, &stub);
  }
};

}  // namespace native
}  // namespace loom
