#include "tensor/native/Copy.h"

#include "tensor/Factory.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<CopyKernel> copy_stub("copy_");
DispatchStub<FillKernel> fill_stub("fill_");
DispatchStub<ElementwiseTakesKernel> elementwise_takes_stub("elementwise_takes");

bool elementwise_takes(Device device, DType dtype) {
  return is_reduced_float(dtype) && elementwise_takes_stub.answer_or(false, device, dtype);
}

DType elementwise_dtype(Device device, DType dtype) {
  return elementwise_takes(device, dtype) ? dtype : compute_dtype(dtype);
}

Tensor elementwise_operand(const Tensor& t, DType compute) {
  if (!is_reduced_float(compute)) return to(t, t.device(), compute);
  // Beside a 16-bit kernel: its own dtype or float32 as they are, anything
  // else (integers, float64) in float32, as compute_dtype's path had it.
  return t.dtype() == compute || t.dtype() == kFloat32 ? t : to(t, t.device(), kFloat32);
}

void check_defined(const char* op, const Tensor& t, const char* name) {
  LOOM_CHECK(t.defined(), op, ": argument '", name, "' is an undefined tensor");
}

void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b,
                       const char* b_name) {
  LOOM_CHECK(a.device() == b.device(), op,
             ": expected all tensors to be on the same device, but found at least two "
             "devices, ",
             a.device(), " (argument '", a_name, "') and ", b.device(), " (argument '",
             b_name, "'); move one with .to(device)");
}

void check_kernel_device(const char* op, const Tensor& t) { check_device_usable(t.device(), op); }

namespace {

bool overlaps(const Tensor& a, const Tensor& b) {
  if (!a.storage().is_alias_of(b.storage()) || a.numel() == 0 || b.numel() == 0) return false;
  return true;  // conservative: same storage
}

}  // namespace

void copy_(const Tensor& dst, const Tensor& src, bool non_blocking) {
  check_defined("copy_", dst, "self");
  check_defined("copy_", src, "src");
  Tensor s = src;
  if (s.sizes() != dst.sizes()) s = expand(s, dst.sizes());
  if (overlaps(dst, s) && !(dst.is_same(s))) s = clone(s);
  if (dst.is_same(src)) return;
  // The CUDA kernel takes every copy a CUDA device is part of.
  copy_stub(dst.is_cpu() ? s.device() : dst.device(), dst, s, non_blocking);
  dst.bump_version();
}

Tensor clone(const Tensor& src) {
  check_defined("clone", src, "self");
  Tensor out = empty(src.sizes(), TensorOptions(src.dtype()).device(src.device()));
  copy_(out, src);
  return out;
}

Tensor contiguous(const Tensor& src) { return contiguous(src, MemoryFormat::kContiguous); }

Tensor contiguous(const Tensor& src, MemoryFormat format) {
  check_defined("contiguous", src, "self");
  if (src.is_contiguous(format)) return src;
  Tensor out = empty(src.sizes(), TensorOptions(src.dtype()).device(src.device()), format);
  copy_(out, src);
  return out;
}

Tensor empty_keeping_layout(const IntList& sizes, TensorOptions options, const Tensor& like) {
  const bool keep = like.defined() && like.sizes() == sizes;
  return empty(sizes, options, keep ? like.suggest_memory_format() : MemoryFormat::kContiguous);
}

Tensor to(const Tensor& src, Device device, DType dtype, bool non_blocking) {
  check_defined("to", src, "self");
  if (src.device() == device && src.dtype() == dtype) return src;
  check_device_usable(device, "to");
  // Channels last stays so (PyTorch's preserve_format).
  Tensor out = empty_keeping_layout(src.sizes(), TensorOptions(dtype).device(device), src);
  copy_(out, src, non_blocking);
  return out;
}

void fill_(const Tensor& t, Scalar value) {
  check_defined("fill_", t, "self");
  fill_stub(t.device(), t, value);
  t.bump_version();
}

Tensor widen(const Tensor& t) {
  return t.defined() && is_reduced_float(t.dtype()) ? to(t, t.device(), kFloat32) : t;
}

Tensor round_to(const Tensor& t, DType dtype) {
  return t.defined() && is_reduced_float(dtype) && t.dtype() != dtype ? to(t, t.device(), dtype)
                                                                        : t;
}

}  // namespace native
}  // namespace loom
