// Raw (non-differentiable) copies and conversions, on any device.  The
// differentiable forms (Tensor::to, clone, copy_) wrap these.
#pragma once

#include "tensor/Tensor.h"
#include "tensor/TensorOptions.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// Copies src into dst: src broadcast to dst's shape, converted to dst's dtype,
// across devices (CUDA cases: tensor/cuda/Copy.cpp, which says when
// non_blocking makes a host<->GPU copy asynchronous).  Bumps dst's version.
void copy_(const Tensor& dst, const Tensor& src, bool non_blocking = false);
// A new contiguous tensor with the same values.
Tensor clone(const Tensor& src);
// src itself when already contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& src);
// src itself when already dense in `format`, else a copy laid out so.
Tensor contiguous(const Tensor& src, MemoryFormat format);
// A new tensor of `sizes` for an op computing from `like`: channels last
// when like has these sizes and is channels last (and not also contiguous),
// else contiguous.  Elementwise results keep their input's layout this way,
// as in PyTorch, so channels-last activations stay so through ReLU and adds.
Tensor empty_keeping_layout(const IntList& sizes, TensorOptions options, const Tensor& like);
// src itself when nothing changes, else a copy on `device` with `dtype`
// (channels last when src is; otherwise contiguous).
// Throws loom::Error for a CUDA device that does not exist (or without CUDA).
Tensor to(const Tensor& src, Device device, DType dtype, bool non_blocking = false);
// The dtype a kernel computes `dtype` in: float32 for float16 and bfloat16,
// else `dtype` itself.  An op on 16-bit floats converts its inputs to
// float32, runs the float32 kernel and rounds the result once into its
// result dtype, as PyTorch's kernels do inside (DESIGN.md: reduced precision
// computes and accumulates in float32).
inline DType compute_dtype(DType dtype) { return is_reduced_float(dtype) ? kFloat32 : dtype; }
// Whether `device`'s elementwise kernels (the binary and unary tables, their
// in-place and backward forms) take the 16-bit `dtype` as it is, computing
// in float32 inside without float32 copies of the tensors (same values as
// compute_dtype's path): bfloat16 on the CPU, float16 and bfloat16 on CUDA.
bool elementwise_takes(Device device, DType dtype);
// The dtype such a kernel on `device` is given for `dtype`: dtype itself
// where elementwise_takes, else compute_dtype(dtype).
DType elementwise_dtype(Device device, DType dtype);
// An operand converted for a kernel computing in `compute`.  Beside a kernel
// that takes a 16-bit dtype, operands of that dtype and float32 ones stay as
// they are (a scalar, `x * 0.1`, multiplies by float(0.1)) and others
// (integers, float64) become float32, so each value is rounded once, as on
// compute_dtype's path; otherwise the operand becomes `compute`.
Tensor elementwise_operand(const Tensor& t, DType compute);
// For ops whose kernels have no 16-bit path: the float32 copy of a float16
// or bfloat16 tensor, else t itself (an undefined t stays undefined).
Tensor widen(const Tensor& t);
// A float32 result rounded back into `dtype` when that is float16 or
// bfloat16 (t defined); else t itself.
Tensor round_to(const Tensor& t, DType dtype);
// Runs `kernel(t32)` on a float32 copy of a 16-bit float tensor `t` and
// copies the result back into `t` (one rounding); for any other dtype runs
// `kernel(t)`.  For in-place ops.
template <typename Kernel>
void in_compute_dtype(const Tensor& t, Kernel&& kernel);

// Fills every element with value (converted to t's dtype), on the CPU or a
// CUDA device.  Bumps the version.
void fill_(const Tensor& t, Scalar value);

// Throws unless every tensor is on the same device, naming the op, the
// arguments and both devices.
void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b,
                       const char* b_name);
// For ops with a kernel per backend: throws unless t's device can run one, i.e.
// t is on the CPU or on a visible CUDA device (the message names the op and
// the device index, or says loom was built without CUDA).  Called before
// touching t's data.
void check_kernel_device(const char* op, const Tensor& t);
// Throws unless t is defined, naming the op and argument.
void check_defined(const char* op, const Tensor& t, const char* name);

// ---- kernels (one slot per device type) -----------------------------------------
// dst <- src converted to dst's dtype; one shape, any layouts, no overlap.
// The slot is chosen by the CUDA device among the two when there is one (the
// CUDA kernel does every copy with a GPU in it), else the CPU's.
using CopyKernel = void (*)(const Tensor& dst, const Tensor& src, bool non_blocking);
// Every element of t <- value converted to t's dtype.
using FillKernel = void (*)(const Tensor& t, Scalar value);
// Whether the device's elementwise kernels take `dtype` (a 16-bit float) as it is.
using ElementwiseTakesKernel = bool (*)(DType dtype);

extern DispatchStub<CopyKernel> copy_stub;
extern DispatchStub<FillKernel> fill_stub;
extern DispatchStub<ElementwiseTakesKernel> elementwise_takes_stub;

template <typename Kernel>
void in_compute_dtype(const Tensor& t, Kernel&& kernel) {
  if (!is_reduced_float(t.dtype())) {
    kernel(t);
    return;
  }
  const Tensor wide = to(t, t.device(), kFloat32);
  kernel(wide);
  copy_(t, wide);
}

}  // namespace native
}  // namespace loom
