// Matrix products: shapes, dtypes and devices checked here, the products in
// the backends' GEMM kernels (tensor/cpu/Linalg.cpp on cpu::gemm,
// tensor/cuda/Gemm.cpp on cuBLAS), which decide how a strided view reaches
// the GEMM (GemmLayout.h).
#include "tensor/native/Linalg.h"

#include <algorithm>
#include <string>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<MatmulKernel> gemm_stub("gemm");
DispatchStub<BmmKernel> bmm_stub("bmm");
DispatchStub<SumRowsKernel> sum_rows_stub("sum_rows");
DispatchStub<GemmTakesKernel> gemm_takes_stub("gemm_takes");

namespace {

// Whether t's 16-bit float dtype goes to its device's GEMM as it is.
bool gemm_takes(const Tensor& t) {
  return is_reduced_float(t.dtype()) && gemm_takes_stub.answer_or(false, t.device(), t.dtype());
}

// A float16/bfloat16 product the device has no 16-bit GEMM for: computed in
// float32 and rounded once.
bool widened(const Tensor& t) { return is_reduced_float(t.dtype()) && !gemm_takes(t); }

// Throws unless the GEMM kernels support t's dtype.
void check_gemm_dtype(const Tensor& t, const char* what) {
  const DType dtype = t.dtype();
  LOOM_CHECK(dtype == kFloat32 || dtype == kFloat64 || dtype == kInt64 || dtype == kInt32 ||
                 gemm_takes(t),
             what, ": not supported for dtype ", dtype_name(dtype),
             " (supported: float32, float64, int32, int64; float16 and bfloat16 on CUDA, bfloat16 on CPUs with oneDNN bfloat16 kernels)");
}

void gemm_into(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  check_gemm_dtype(out, "gemm");
  gemm_stub(out.device(), a, b, out, accumulate);
}

std::string dims_str(const Tensor& t) {
  std::string s;
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? "x" : "") + std::to_string(t.sizes()[d]);
  return s;
}

void check_pair(const char* op, const Tensor& a, const char* a_name, const Tensor& b,
                const char* b_name) {
  check_defined(op, a, a_name);
  check_defined(op, b, b_name);
  check_same_device(op, a, a_name, b, b_name);
  LOOM_CHECK(a.dtype() == b.dtype(), op, ": expected ", a_name, " and ", b_name,
             " to have the same dtype, but got ", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()));
  check_kernel_device(op, a);
}

// Sums the rows of a (m, n) matrix into a (n) vector.
Tensor sum_rows(const Tensor& g2) {
  check_gemm_dtype(g2, "linear");
  return sum_rows_stub(g2.device(), g2);
}

}  // namespace

Tensor mm(const Tensor& self, const Tensor& other) {
  check_pair("mm", self, "mat1", other, "mat2");
  if (widened(self)) return round_to(mm(widen(self), widen(other)), self.dtype());
  LOOM_CHECK(self.dim() == 2 && other.dim() == 2, "mm: expected 2-D matrices, got mat1 ",
             self.describe(), " and mat2 ", other.describe());
  LOOM_CHECK(self.size(1) == other.size(0), "mm: mat1 and mat2 shapes cannot be multiplied (",
             dims_str(self), " and ", dims_str(other), ")");
  Tensor out = empty({self.size(0), other.size(1)},
                     TensorOptions(self.dtype()).device(self.device()));
  gemm_into(self, other, out, false);
  return out;
}

Tensor bmm(const Tensor& self, const Tensor& other) {
  check_pair("bmm", self, "batch1", other, "batch2");
  if (widened(self)) return round_to(bmm(widen(self), widen(other)), self.dtype());
  LOOM_CHECK(self.dim() == 3 && other.dim() == 3, "bmm: expected 3-D tensors, got batch1 ",
             self.describe(), " and batch2 ", other.describe());
  LOOM_CHECK(self.size(0) == other.size(0), "bmm: batch1 and batch2 must have the same batch size, got ",
             shape_str(self.sizes()), " and ", shape_str(other.sizes()));
  LOOM_CHECK(self.size(2) == other.size(1),
             "bmm: batch1 and batch2 shapes cannot be multiplied (", dims_str(self), " and ",
             dims_str(other), ")");
  const int64_t batch = self.size(0), m = self.size(1), n = other.size(2);
  Tensor out = empty({batch, m, n}, TensorOptions(self.dtype()).device(self.device()));
  if (out.numel() == 0) return out;
  check_gemm_dtype(out, "bmm");
  bmm_stub(out.device(), self, other, out);
  return out;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_pair("linear", input, "input", weight, "weight");
  if (widened(input) && (!bias.defined() || bias.dtype() == input.dtype()))
    return round_to(linear(widen(input), widen(weight), widen(bias)), input.dtype());
  LOOM_CHECK(input.dim() >= 1, "linear: expected input of at least 1 dim, got ",
             input.describe());
  LOOM_CHECK(weight.dim() == 2, "linear: expected a 2-D weight (out_features, in_features), got ",
             weight.describe());
  const int64_t in = input.size(-1), out_features = weight.size(0);
  LOOM_CHECK(weight.size(1) == in, "linear: input and weight shapes cannot be multiplied: input ",
             shape_str(input.sizes()), " has ", in, " features in its last dim but weight ",
             shape_str(weight.sizes()), " expects ", weight.size(1),
             " (weight is (out_features, in_features))");
  if (bias.defined()) {
    check_same_device("linear", input, "input", bias, "bias");
    LOOM_CHECK(bias.dtype() == input.dtype(), "linear: expected bias of dtype ",
               dtype_name(input.dtype()), ", got ", bias.describe());
    LOOM_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "linear: expected bias of shape [",
               out_features, "] for weight ", shape_str(weight.sizes()), ", got ",
               shape_str(bias.sizes()));
  }
  IntList out_shape = input.sizes();
  out_shape.back() = out_features;
  const int64_t rows = in == 0 ? numel_of(out_shape) / std::max<int64_t>(out_features, 1)
                                : input.numel() / in;
  Tensor out = empty(out_shape, TensorOptions(input.dtype()).device(input.device()));
  if (out.numel() == 0) return out;
  const Tensor out2 = view(out, {rows, out_features});
  if (bias.defined()) copy_(out2, expand(bias, {rows, out_features}));
  gemm_into(reshape(input, {rows, in}), transpose(weight, 0, 1), out2, bias.defined());
  return out;
}

void linear_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                     bool need_input, bool need_weight, bool need_bias, Tensor& grad_input,
                     Tensor& grad_weight, Tensor& grad_bias) {
  check_pair("linear_backward", input, "input", weight, "weight");
  check_defined("linear_backward", grad_output, "grad_output");
  check_same_device("linear_backward", input, "input", grad_output, "grad_output");
  LOOM_CHECK(weight.dim() == 2 && input.dim() >= 1 && input.size(-1) == weight.size(1),
             "linear_backward: input ", input.describe(), " and weight ", weight.describe(),
             " are not a linear layer's (weight (out_features, in_features))");
  IntList out_shape = input.sizes();
  out_shape.back() = weight.size(0);
  LOOM_CHECK(grad_output.sizes() == out_shape, "linear_backward: expected grad_output of shape ",
             shape_str(out_shape), " (linear's output), got ", grad_output.describe());
  // grad_output may differ from the input in dtype only: it is converted
  // (the GEMM kernels read every operand in the output's dtype).
  if (grad_output.dtype() != input.dtype()) {
    linear_backward(to(grad_output, input.device(), input.dtype()), input, weight, need_input,
                    need_weight, need_bias, grad_input, grad_weight, grad_bias);
    return;
  }
  if (widened(input)) {
    linear_backward(widen(grad_output), widen(input), widen(weight), need_input, need_weight,
                    need_bias, grad_input, grad_weight, grad_bias);
    grad_input = round_to(grad_input, input.dtype());
    grad_weight = round_to(grad_weight, input.dtype());
    grad_bias = round_to(grad_bias, input.dtype());
    return;
  }
  const int64_t in = weight.size(1), out_features = weight.size(0);
  const int64_t rows = input.numel() / std::max<int64_t>(in, 1);
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  const Tensor g2 = reshape(grad_output, {rows, out_features});
  if (need_input) {
    grad_input = empty(input.sizes(), options);
    if (grad_input.numel() > 0) gemm_into(g2, weight, view(grad_input, {rows, in}), false);
  }
  if (need_weight) {
    grad_weight = empty({out_features, in}, options);
    gemm_into(transpose(g2, 0, 1), reshape(input, {rows, in}), grad_weight, false);
  }
  if (need_bias) grad_bias = sum_rows(g2);
}

}  // namespace native
}  // namespace loom
