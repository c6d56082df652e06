// The CUDA backend of the elementwise ops: kernels for the dispatch slots of
// native/Binary.h, Unary.h and Where.h (registered at the bottom), and the
// dtype conversion copies use (Convert.h).  The native ops (Binary.cpp, ...)
// decide dtypes and broadcasting once for both backends and pass operands
// already of the output's shape and compute dtype;
// here each operand's sizes and strides become one ElementwiseLayout (dims of
// size 1 dropped, the rest ordered by stride, dims contiguous in every operand
// merged, so most layouts -- channels last too -- end up 1-d and take the
// vectorised loop) and the raw launcher of
// tensor/cuda/Elementwise.h runs on the device's current stream.  A layout
// with more than kMaxElementwiseDims unmergeable dims runs on contiguous
// copies instead.  A CPU scalar operand (`x * 2`) becomes an immediate of the
// layout: its value travels in the kernel's arguments.
#include <algorithm>
#include <vector>

#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/cuda/Convert.h"
#include "tensor/cuda/Elementwise.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Unary.h"
#include "tensor/native/Where.h"

namespace loom {
namespace cuda {
namespace {

// Fills l with the layout of out and ins (all of out's shape); false when more
// than kMaxElementwiseDims dims remain after merging.
bool make_layout(const Tensor& out, const std::vector<Tensor>& ins, ElementwiseLayout& l) {
  l = ElementwiseLayout();
  l.noperands = static_cast<int>(ins.size()) + 1;
  LOOM_CHECK(l.noperands <= kMaxElementwiseOperands, "CUDA elementwise: ", l.noperands,
             " operands, at most ", kMaxElementwiseOperands, " are supported");
  l.numel = out.numel();
  std::vector<const Tensor*> ops = {&out};
  for (const Tensor& t : ins) {
    LOOM_CHECK(t.sizes() == out.sizes(), "CUDA elementwise: operand ", t.describe(),
               " does not have the output's shape ", shape_str(out.sizes()));
    ops.push_back(&t);
  }
  if (l.numel == 0) return true;
  // The dims taken outermost first by the operands' strides (the output's
  // first, the inputs' breaking ties), so operands all channels last, or all
  // in any one order of dense dims, merge to one dim as contiguous ones do
  // (an elementwise op may visit the elements in any order).
  std::vector<int64_t> order(static_cast<size_t>(out.dim()));
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    for (const Tensor* t : ops)
      if (t->strides()[a] != t->strides()[b]) return t->strides()[a] > t->strides()[b];
    return false;
  });
  // Kept dims, outermost first; d merges into the previous kept dim when every
  // operand steps over that dim exactly as far as over all of d.
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(ops.size());
  for (int64_t d : order) {
    const int64_t size = out.sizes()[d];
    if (size == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; k < ops.size() && merge; ++k)
      merge = strides[k].back() == ops[k]->strides()[d] * size;
    if (merge) sizes.back() *= size;
    else sizes.push_back(size);
    for (size_t k = 0; k < ops.size(); ++k) {
      if (merge) strides[k].back() = ops[k]->strides()[d];
      else strides[k].push_back(ops[k]->strides()[d]);
    }
  }
  if (sizes.size() > static_cast<size_t>(kMaxElementwiseDims)) return false;
  l.ndim = static_cast<int>(sizes.size());
  l.dense = l.ndim <= 1;
  for (int k = 0; k < l.noperands; ++k) {
    bool all_zero = true;
    for (int d = 0; d < l.ndim; ++d) {
      l.sizes[d] = sizes[d];
      l.strides[k][d] = strides[k][d];
      all_zero = all_zero && strides[k][d] == 0;
    }
    l.scalar[k] = k > 0 && all_zero;
    if (l.ndim == 1 && strides[k][0] != 1 && !l.scalar[k]) l.dense = false;
  }
  // A CPU scalar beside CUDA tensors (native::scalar_operand) goes by value.
  for (int k = 1; k < l.noperands; ++k) {
    const Tensor& t = *ops[k];
    if (t.device() == out.device()) continue;
    LOOM_CHECK(t.is_cpu() && l.scalar[k] && element_size(t.dtype()) <= 8,
               "CUDA elementwise: operand ", t.describe(), " is on ", t.device().str(),
               ", not ", out.device().str(), "; only a CPU scalar may stand beside CUDA tensors");
    set_immediate(l, k, t.data_ptr(), element_size(t.dtype()));
  }
  return true;
}

// Calls launch(layout, out, ins).  A layout with too many dims to pass runs on
// contiguous copies of the inputs into a contiguous output (then copied into
// out), which always merge to one dim.
template <typename Launch>
void run(const Tensor& out, std::vector<Tensor> ins, const Launch& launch) {
  ElementwiseLayout l;
  if (make_layout(out, ins, l)) return launch(l, out, ins);
  for (Tensor& t : ins)
    if (t.device() == out.device()) t = native::contiguous(t);  // not an immediate CPU scalar
  const Tensor o = out.is_contiguous()
                       ? out
                       : empty(out.sizes(), TensorOptions(out.dtype()).device(out.device()));
  LOOM_CHECK(make_layout(o, ins, l), "CUDA elementwise: contiguous operands did not merge");
  launch(l, o, ins);
  if (!o.is_same(out)) native::copy_(out, o);
}

std::pair<double, double> bounds(const std::optional<Scalar>& min,
                                 const std::optional<Scalar>& max) {
  return {min ? min->to_double() : 0.0, max ? max->to_double() : 0.0};
}

void binary_kernel(native::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                   Scalar alpha) {
  run(out, {a, b}, [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& in) {
    const int device = o.device().index;
    if (is_reduced_float(o.dtype())) {
      // A 16-bit result from 16-bit (or float32 scalar) operands, as they are.
      binary_16bit(op, o.dtype(), in[0].dtype(), in[1].dtype(), l, o.data_ptr(),
                   in[0].data_ptr(), in[1].data_ptr(), alpha.to_double(), device,
                   current_stream_handle(device));
      return;
    }
    binary(op, a.dtype(), l, o.data_ptr(), in[0].data_ptr(), in[1].data_ptr(), alpha.to_double(),
           device, current_stream_handle(device));
  });
}

// The binary and unary tables, their in-place forms and unary_backward take
// float16 and bfloat16 as they are (float32 inside, one rounding): no
// float32 copies of 16-bit activations under autocast.
bool elementwise_takes_kernel(DType dtype) { return dtype == kFloat16 || dtype == kBFloat16; }

void isclose_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double rtol,
                    double atol) {
  run(out, {a, b}, [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& in) {
    const int device = o.device().index;
    isclose(l, o.data_ptr(), in[0].data_ptr(), in[1].data_ptr(), rtol, atol, device,
            current_stream_handle(device));
  });
}

void unary_kernel(native::UnaryOp op, const optable::UnaryArgs& args, const Tensor& out,
                  const Tensor& in) {
  run(out, {in}, [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& i) {
    const int device = o.device().index;
    unary(op, args, o.dtype(), l, o.data_ptr(), i[0].data_ptr(), device,
          current_stream_handle(device));
  });
}

void pow_scalar_kernel(const Tensor& out, const Tensor& in, Scalar exponent) {
  run(out, {in}, [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& i) {
    const int device = o.device().index;
    pow_scalar(o.dtype(), l, o.data_ptr(), i[0].data_ptr(), exponent.to_double(), device,
               current_stream_handle(device));
  });
}

void clamp_kernel(const Tensor& out, const Tensor& in, std::optional<Scalar> min,
                  std::optional<Scalar> max) {
  const auto [lo, hi] = bounds(min, max);
  run(out, {in}, [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& i) {
    const int device = o.device().index;
    clamp(o.dtype(), l, o.data_ptr(), i[0].data_ptr(), min.has_value(), lo, max.has_value(), hi,
          device, current_stream_handle(device));
  });
}

void unary_backward_kernel(native::UnaryOp op, const optable::UnaryArgs& args, const Tensor& out,
                           const Tensor& grad, const Tensor& saved) {
  run(out, {grad, saved},
      [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& in) {
        const int device = o.device().index;
        unary_backward(op, args, o.dtype(), l, o.data_ptr(), in[0].data_ptr(), in[1].data_ptr(),
                       device, current_stream_handle(device));
      });
}

void pow_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                         double exponent) {
  run(out, {grad, self},
      [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& in) {
        const int device = o.device().index;
        pow_backward(o.dtype(), l, o.data_ptr(), in[0].data_ptr(), in[1].data_ptr(), exponent,
                     device, current_stream_handle(device));
      });
}

void clamp_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& self,
                           std::optional<Scalar> min, std::optional<Scalar> max) {
  const auto [lo, hi] = bounds(min, max);
  run(out, {grad, self},
      [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& in) {
        const int device = o.device().index;
        clamp_backward(o.dtype(), l, o.data_ptr(), in[0].data_ptr(), in[1].data_ptr(),
                       min.has_value(), lo, max.has_value(), hi, device,
                       current_stream_handle(device));
      });
}

void where_kernel(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  run(out, {condition, a, b},
      [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& in) {
        const int device = o.device().index;
        where(o.dtype(), l, o.data_ptr(), in[0].data_ptr(), in[1].data_ptr(), in[2].data_ptr(),
              device, current_stream_handle(device));
      });
}

}  // namespace

void convert_kernel(const Tensor& out, const Tensor& in) {
  run(out, {in}, [&](const ElementwiseLayout& l, const Tensor& o, const std::vector<Tensor>& i) {
    const int device = o.device().index;
    convert(o.dtype(), i[0].dtype(), l, o.data_ptr(), i[0].data_ptr(), device,
            current_stream_handle(device));
  });
}

static const native::RegisterKernel reg_binary(native::binary_stub, kCUDA, &binary_kernel);
static const native::RegisterKernel reg_isclose(native::isclose_stub, kCUDA, &isclose_kernel);
static const native::RegisterKernel reg_unary(native::unary_stub, kCUDA, &unary_kernel);
static const native::RegisterKernel reg_unary_backward(native::unary_backward_stub, kCUDA,
                                                       &unary_backward_kernel);
static const native::RegisterKernel reg_where(native::where_stub, kCUDA, &where_kernel);
static const native::RegisterKernel reg_elementwise_takes(native::elementwise_takes_stub, kCUDA,
                                                          &elementwise_takes_kernel);
static const native::RegisterKernel reg_pow_scalar(native::pow_scalar_stub, kCUDA,
                                                   &pow_scalar_kernel);
static const native::RegisterKernel reg_clamp(native::clamp_stub, kCUDA, &clamp_kernel);
static const native::RegisterKernel reg_pow_backward(native::pow_backward_stub, kCUDA,
                                                     &pow_backward_kernel);
static const native::RegisterKernel reg_clamp_backward(native::clamp_backward_stub, kCUDA,
                                                       &clamp_backward_kernel);

}  // namespace cuda
}  // namespace loom
