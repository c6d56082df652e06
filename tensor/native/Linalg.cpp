// Matrix products on top of cpu::gemm (CPU) or cuBLAS (CUDA,
// tensor/native/CudaLinalg.cpp).  The only layout work is deciding how a
// strided 2-D view reaches the GEMM (tensor/native/GemmLayout.h): row-major
// (unit column stride), as a transpose (unit row stride), or, for anything
// else, as a contiguous copy.
#include "tensor/native/Linalg.h"

#include <algorithm>

#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/ShapeUtil.h"
#include "tensor/cpu/Gemm.h"
#include "tensor/native/Copy.h"
#include "tensor/native/GemmLayout.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {
namespace {

// A (rows, cols) matrix as the GEMM sees it: data, transpose flag, leading dim.
// For batched operands `batch_stride` steps from one matrix to the next.
struct GemmOperand {
  Tensor holder;  // the tensor `data` points into (maybe a contiguous copy)
  bool trans = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// t is (rows, cols) or (batch, rows, cols).
GemmOperand gemm_operand(const Tensor& t) {
  const int64_t r = t.dim();
  const MatrixLayout l = matrix_layout(t.sizes()[r - 2], t.sizes()[r - 1], t.strides()[r - 2],
                                       t.strides()[r - 1]);
  GemmOperand op;
  op.holder = l.copy ? contiguous(t) : t;
  op.trans = l.trans;
  op.ld = l.ld;
  if (r == 3) op.batch_stride = op.holder.strides()[0];
  return op;
}

// Calls fn(TypeTag<T>) for the dtypes the GEMM supports.
template <typename Fn>
void dispatch_gemm(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case kFloat32: return fn(TypeTag<float>{});
    case kFloat64: return fn(TypeTag<double>{});
    case kInt64: return fn(TypeTag<int64_t>{});
    case kInt32: return fn(TypeTag<int32_t>{});
    default:
      LOOM_FAIL(what, ": not supported for dtype ", dtype_name(dtype),
                " (supported: float32, float64, int32, int64)");
  }
}

// out (m, n) = a (m, k) @ b (k, n), plus out itself when accumulate.  a and b
// are 2-D of out's dtype (any strides); out is contiguous.
void gemm_into(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  if (out.is_cuda()) {
    dispatch_gemm(out.dtype(), "gemm", [](auto) {});
    cuda::gemm_kernel(a, b, out, accumulate);
    return;
  }
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const GemmOperand oa = gemm_operand(a), ob = gemm_operand(b);
  dispatch_gemm(out.dtype(), "gemm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::gemm_parallel<T>(oa.trans, ob.trans, m, n, k, T(1),
                          static_cast<const T*>(oa.holder.data_ptr()), oa.ld,
                          static_cast<const T*>(ob.holder.data_ptr()), ob.ld,
                          accumulate ? T(1) : T(0), static_cast<T*>(out.data_ptr()), n);
  });
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
  if (g2.is_cuda()) {
    dispatch_gemm(g2.dtype(), "linear", [](auto) {});
    return to(sum(g2, {0}, false), g2.device(), g2.dtype());
  }
  const int64_t m = g2.size(0), n = g2.size(1);
  const Tensor g = contiguous(g2);
  Tensor out = empty({n}, TensorOptions(g.dtype()).device(g.device()));
  dispatch_gemm(g.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* src = static_cast<const T*>(g.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(m, 1)),
                 [&](int64_t j0, int64_t j1) {
                   std::vector<Acc> acc(j1 - j0, Acc(0));
                   for (int64_t i = 0; i < m; ++i)
                     for (int64_t j = j0; j < j1; ++j) acc[j - j0] += src[i * n + j];
                   for (int64_t j = j0; j < j1; ++j) dst[j] = static_cast<T>(acc[j - j0]);
                 });
  });
  return out;
}

}  // namespace

Tensor mm(const Tensor& self, const Tensor& other) {
  check_pair("mm", self, "mat1", other, "mat2");
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
  LOOM_CHECK(self.dim() == 3 && other.dim() == 3, "bmm: expected 3-D tensors, got batch1 ",
             self.describe(), " and batch2 ", other.describe());
  LOOM_CHECK(self.size(0) == other.size(0), "bmm: batch1 and batch2 must have the same batch size, got ",
             shape_str(self.sizes()), " and ", shape_str(other.sizes()));
  LOOM_CHECK(self.size(2) == other.size(1),
             "bmm: batch1 and batch2 shapes cannot be multiplied (", dims_str(self), " and ",
             dims_str(other), ")");
  const int64_t batch = self.size(0), m = self.size(1), k = self.size(2), n = other.size(2);
  Tensor out = empty({batch, m, n}, TensorOptions(self.dtype()).device(self.device()));
  if (out.numel() == 0) return out;
  if (out.is_cuda()) {
    gemm_into(self, other, out, false);
    return out;
  }
  const GemmOperand oa = gemm_operand(self), ob = gemm_operand(other);
  dispatch_gemm(out.dtype(), "bmm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = static_cast<const T*>(oa.holder.data_ptr());
    const T* pb = static_cast<const T*>(ob.holder.data_ptr());
    T* pc = static_cast<T*>(out.data_ptr());
    auto one = [&](int64_t b, bool parallel) {
      auto* f = parallel ? &cpu::gemm_parallel<T> : &cpu::gemm<T>;
      f(oa.trans, ob.trans, m, n, k, T(1), pa + b * oa.batch_stride, oa.ld,
        pb + b * ob.batch_stride, ob.ld, T(0), pc + b * m * n, n);
    };
    if (batch >= get_num_threads()) {
      const int64_t work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1));
      parallel_for(0, batch, std::max<int64_t>(1, 65536 / work), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) one(b, false);
      });
    } else {
      for (int64_t b = 0; b < batch; ++b) one(b, true);
    }
  });
  return out;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_pair("linear", input, "input", weight, "weight");
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
