// CUDA elementwise launchers on raw pointers, for tensor/cuda/Elementwise.cpp.
//
// Plain C++ declarations (no CUDA types), so every build can include them; the
// kernels are in Binary.cu, Unary.cu, UnaryBackward.cu and Where.cu, the
// shared loops in Loops.cuh.  Their Tensor-level callers are in
// Elementwise.cpp (compiled only with CUDA, like this folder's kernels).
//
// Every launcher reads its operands through an ElementwiseLayout: one shape
// and, per operand, element strides over it (0 for a broadcast dim), with
// operand 0 the output.  A layout marked `dense` (every operand row-major
// contiguous or one broadcast value) runs a grid-stride loop with 4-element
// vector loads when the pointers allow; any other layout turns each linear
// index into per-operand offsets (the N-d offset calculator).  A single-value
// operand may also be an immediate: its value in the layout itself.  The dtype and
// broadcasting semantics are decided by the callers (tensor/native/*.cpp);
// these only apply the per-element function.
//
// Each call queues one kernel on stream `stream` (a cudaStream_t as an integer,
// 0 for the legacy default stream) of CUDA device `device`, checks the launch,
// and returns without waiting.  Throws loom::Error on a CUDA error or a dtype
// the op has no kernel for.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/DType.h"
#include "tensor/native/BinaryOps.h"
#include "tensor/native/UnaryOps.h"

namespace loom {

namespace cuda {

// The most dimensions (after merging dims that are contiguous in every
// operand) and operands an elementwise kernel takes.
constexpr int kMaxElementwiseDims = 8;
constexpr int kMaxElementwiseOperands = 4;

// Passed to the kernels by value.
struct ElementwiseLayout {
  int ndim = 0;
  int noperands = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxElementwiseDims] = {};
  // strides[k][d]: elements between neighbours along dim d in operand k.
  int64_t strides[kMaxElementwiseOperands][kMaxElementwiseDims] = {};
  // Every operand is row-major contiguous over `sizes` or a single value
  // (all strides 0, flagged in `scalar`).
  bool dense = false;
  bool scalar[kMaxElementwiseOperands] = {};
  // An operand held here rather than in device memory: a CPU scalar beside
  // CUDA tensors (`x * 2`, a wrapped number) rides in the kernel's
  // arguments, so it costs no allocation and no fill kernel.  Its bytes (of
  // the operand's dtype, at most 8) are in immediate_bits; its pointer is
  // never read.  An immediate operand is always `scalar` too.
  bool immediate[kMaxElementwiseOperands] = {};
  uint64_t immediate_bits[kMaxElementwiseOperands] = {};
};

// Makes operand k (k >= 1) of l an immediate holding the `nbytes` bytes at
// `value` (an element of the operand's dtype, nbytes <= 8).
inline void set_immediate(ElementwiseLayout& l, int k, const void* value, size_t nbytes) {
  uint64_t bits = 0;
  std::memcpy(&bits, value, nbytes);
  l.scalar[k] = true;
  l.immediate[k] = true;
  l.immediate_bits[k] = bits;
}

// out = a op b.  a and b hold `dtype`; out holds bool for comparisons, else
// `dtype`.  alpha scales b for add/sub (converted to dtype).
void binary(native::BinaryOp op, DType dtype, const ElementwiseLayout& layout, void* out,
            const void* a, const void* b, double alpha, int device, uint64_t stream);
// out (float16 or bfloat16, out_dtype) = a op b computed in float32 and
// rounded once; a and b each of out_dtype or float32 (a scalar beside the
// 16-bit tensors).  Not the comparisons (their out is bool: binary).
void binary_16bit(native::BinaryOp op, DType out_dtype, DType a_dtype, DType b_dtype,
                  const ElementwiseLayout& layout, void* out, const void* a, const void* b,
                  double alpha, int device, uint64_t stream);
// out (bool) = |a - b| <= atol + rtol * |b| (equal values, infinities too,
// are close; nan never is).  a and b are float64.
void isclose(const ElementwiseLayout& layout, void* out, const void* a, const void* b,
             double rtol, double atol, int device, uint64_t stream);

// out = op(in), both of `dtype` (one the op's dtype rule allows; float16
// and bfloat16 computed in float32 and rounded once).
void unary(native::UnaryOp op, const optable::UnaryArgs& args, DType dtype,
           const ElementwiseLayout& layout, void* out, const void* in, int device,
           uint64_t stream);
// out = in ** exponent, both of `dtype` (not bool; an integer dtype takes the
// exponent as a non-negative integer).
void pow_scalar(DType dtype, const ElementwiseLayout& layout, void* out, const void* in,
                double exponent, int device, uint64_t stream);
// out = min(max(in, lo), hi), both of `dtype` (not bool); an absent bound is
// the dtype's extreme, a bound outside an integer dtype's range saturates.
void clamp(DType dtype, const ElementwiseLayout& layout, void* out, const void* in, bool has_min,
           double min, bool has_max, double max, int device, uint64_t stream);

// The fused backward kernels of Unary.h; every operand of floating `dtype`
// (unary_backward: float16 and bfloat16 too, computed in float32 and
// rounded once).
void unary_backward(native::UnaryOp op, const optable::UnaryArgs& args, DType dtype,
                    const ElementwiseLayout& layout, void* out, const void* grad,
                    const void* saved, int device, uint64_t stream);
void pow_backward(DType dtype, const ElementwiseLayout& layout, void* out, const void* grad,
                  const void* self, double exponent, int device, uint64_t stream);
void clamp_backward(DType dtype, const ElementwiseLayout& layout, void* out, const void* grad,
                    const void* self, bool has_min, double min, bool has_max, double max,
                    int device, uint64_t stream);

// out (of out_dtype) = in (of in_dtype) converted as the CPU's static_cast
// does (floating to a narrow integer goes through int64, as x86 truncates);
// every pair of dtypes (kernels in Convert.cu).
void convert(DType out_dtype, DType in_dtype, const ElementwiseLayout& layout, void* out,
             const void* in, int device, uint64_t stream);

// out = condition ? a : b; condition bool, a, b and out of `dtype`.
void where(DType dtype, const ElementwiseLayout& layout, void* out, const void* condition,
           const void* a, const void* b, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
