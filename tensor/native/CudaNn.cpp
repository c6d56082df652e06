// The CUDA backend of the nn-style ops: the cuda::*_kernel functions declared
// beside their CPU twins in Softmax.h, Loss.h, Dropout.h and Index.h.  The
// native ops check arguments and pick layouts once for both backends; here
// each Tensor becomes a raw pointer for the launchers of tensor/cuda/
// (Softmax.h, Loss.h, Dropout.h, Index.h, Optim.h), queued on the device's
// current stream.  Scratch space (partial sums) is an ordinary tensor from
// the caching allocator, so it is released in stream order.
//
// Without CUDA the launchers are stubs (bottom of this file) that throw; the
// native ops never reach them, as check_kernel_device throws first.
#include <cstdint>
#include <limits>

#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/cuda/Dropout.h"
#include "tensor/cuda/Index.h"
#include "tensor/cuda/Loss.h"
#include "tensor/cuda/Optim.h"
#include "tensor/cuda/Softmax.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Dropout.h"
#include "tensor/native/Embedding.h"
#include "tensor/native/Index.h"
#include "tensor/native/Loss.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Softmax.h"
#include "tensor/native/Views.h"

namespace loom {
namespace cuda {
namespace {

int device_of(const Tensor& t) { return t.device().index; }
uint64_t stream_of(const Tensor& t) { return current_stream_handle(t.device().index); }

template <typename T = void>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

Tensor scratch_doubles(const Tensor& like, int64_t n) {
  return empty({n}, TensorOptions(kFloat64).device(like.device()));
}

// (outer, size, inner) of a contiguous tensor around dim.
void split_at(const Tensor& t, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.sizes()[d];
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.sizes()[d];
}

// The CPU kernels' message for the first out-of-range index, deferred.
void check_indices(const char* op, const Tensor& idx, int64_t dim, int64_t size) {
  check_index_values(idx, size, false, 0, [op, dim, size](int64_t bad) {
    return detail::str(op, ": index ", bad, " is out of bounds for dimension ", dim,
                       " with size ", size);
  });
}

IndexLayout index_layout(const Tensor& index, int64_t dim, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(index.dim() <= kMaxIndexDims, "CUDA gather/scatter_add: at most ", kMaxIndexDims,
             " dimensions are supported, got ", index.describe());
  IndexLayout l;
  l.ndim = static_cast<int>(index.dim());
  l.dim = static_cast<int>(dim);
  l.limit = a.sizes()[dim];
  for (int d = 0; d < l.ndim; ++d) {
    l.sizes[d] = index.sizes()[d];
    l.strides[d] = a.strides()[d];
    l.src_strides[d] = b.defined() ? b.strides()[d] : 0;
  }
  return l;
}

}  // namespace

// ---- softmax ------------------------------------------------------------------------

void softmax_kernel(const Tensor& out, const Tensor& x, int64_t outer, int64_t D, int64_t inner,
                    bool log) {
  softmax_forward(x.dtype(), x.data_ptr(), out.data_ptr(), outer, D, inner, log, device_of(x),
                  stream_of(x));
}

void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& output,
                             int64_t outer, int64_t D, int64_t inner, bool log) {
  softmax_backward(output.dtype(), grad.data_ptr(), output.data_ptr(), grad_input.data_ptr(),
                   outer, D, inner, log, device_of(output), stream_of(output));
}

// ---- dropout ------------------------------------------------------------------------

void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& x, double p,
                    uint64_t seed) {
  dropout(x.dtype(), x.data_ptr(), out.data_ptr(), mask.data_ptr(), x.numel(), p, seed, 0,
          device_of(x), stream_of(x));
}

// ---- losses -------------------------------------------------------------------------

void class_loss_kernel(bool cross_entropy, const Tensor& loss, const Tensor& logsumexp,
                       const Tensor& out, const Tensor& total_weight, const Tensor& x,
                       const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                       int64_t S, int64_t ignore_index, double label_smoothing, bool mean) {
  const Tensor scratch = scratch_doubles(x, class_loss_scratch(N * S));
  class_loss_forward(x.dtype(), cross_entropy, x.data_ptr(), cptr<int64_t>(target),
                     cptr(weight), N, C, S, ignore_index, label_smoothing, loss.data_ptr(),
                     logsumexp.defined() ? static_cast<double*>(logsumexp.data_ptr()) : nullptr,
                     out.defined() ? out.data_ptr() : nullptr,
                     static_cast<double*>(total_weight.data_ptr()), mean,
                     static_cast<double*>(scratch.data_ptr()), device_of(x), stream_of(x));
}

void class_loss_backward_kernel(bool cross_entropy, const Tensor& grad_input, const Tensor& grad,
                                const Tensor& divisor, const Tensor& x, const Tensor& logsumexp,
                                const Tensor& target, const Tensor& weight, int64_t N, int64_t C,
                                int64_t S, int64_t ignore_index, double label_smoothing) {
  const Tensor scratch = scratch_doubles(x, 1);  // the sum of the class weights
  class_loss_backward(x.dtype(), cross_entropy, grad_input.data_ptr(), grad.data_ptr(),
                      grad.numel() == 1, cptr<double>(divisor), x.data_ptr(),
                      cptr<double>(logsumexp), cptr<int64_t>(target), cptr(weight), N, C, S,
                      ignore_index, label_smoothing,
                      static_cast<double*>(scratch.data_ptr()), device_of(x), stream_of(x));
}

void squared_error_kernel(const Tensor& out, const Tensor& x, const Tensor& y) {
  squared_error(x.dtype(), x.data_ptr(), y.data_ptr(), x.numel(), true, 1.0, out.data_ptr(),
                nullptr, device_of(x), stream_of(x));
}

void squared_error_sum_kernel(const Tensor& out_sum, const Tensor& x, const Tensor& y,
                              double divisor) {
  const Tensor scratch = scratch_doubles(x, kLossScratch);
  squared_error(x.dtype(), x.data_ptr(), y.data_ptr(), x.numel(), false, divisor,
                out_sum.data_ptr(), static_cast<double*>(scratch.data_ptr()), device_of(x),
                stream_of(x));
}

void squared_error_backward_kernel(const Tensor& grad_input, const Tensor& grad, double scale,
                                   const Tensor& x, const Tensor& y) {
  squared_error_backward(x.dtype(), grad_input.data_ptr(), grad.data_ptr(), grad.numel() == 1,
                         2 * scale, x.data_ptr(), y.data_ptr(), x.numel(), device_of(x),
                         stream_of(x));
}

// ---- indexing -----------------------------------------------------------------------

void index_select_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  const int64_t size = self.sizes()[dim];
  check_indices("index_select", index, dim, size);
  int64_t outer, inner;
  split_at(self, dim, outer, inner);
  index_select(self.element_size(), self.data_ptr(), out.data_ptr(), cptr<int64_t>(index), outer,
               size, index.numel(), inner, device_of(self), stream_of(self));
}

void index_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source) {
  const int64_t size = out.sizes()[dim];
  check_indices("index_add", index, dim, size);
  int64_t outer, inner;
  split_at(out, dim, outer, inner);
  index_add(out.dtype(), out.data_ptr(), source.data_ptr(), cptr<int64_t>(index), outer, size,
            index.numel(), inner, device_of(out), stream_of(out));
}

void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  check_indices("gather", index, dim, self.sizes()[dim]);
  gather(self.element_size(), out.data_ptr(), self.data_ptr(), cptr<int64_t>(index),
         index_layout(index, dim, self, Tensor()), device_of(self), stream_of(self));
}

void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  check_indices("scatter_add", index, dim, out.sizes()[dim]);
  scatter_add(out.dtype(), out.data_ptr(), src.data_ptr(), cptr<int64_t>(index),
              index_layout(index, dim, out, src), device_of(out), stream_of(out));
}

void scatter_reduced_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& indices,
                            int64_t outer, int64_t reduce, int64_t inner) {
  // grad_input (outer, reduce, inner) zero-filled; grad and indices (outer, 1, inner).
  IndexLayout l;
  l.ndim = 3;
  l.dim = 1;
  l.limit = reduce;
  const int64_t sizes[3] = {outer, 1, inner};
  const int64_t in_strides[3] = {reduce * inner, inner, 1};
  const int64_t src_strides[3] = {inner, inner, 1};
  for (int d = 0; d < 3; ++d) {
    l.sizes[d] = sizes[d];
    l.strides[d] = in_strides[d];
    l.src_strides[d] = src_strides[d];
  }
  scatter_add(grad_input.dtype(), grad_input.data_ptr(), grad.data_ptr(), cptr<int64_t>(indices),
              l, device_of(grad), stream_of(grad));
}

// ---- embedding ----------------------------------------------------------------------

void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t V = weight.sizes()[0], D = weight.sizes()[1];
  index_select(weight.element_size(), weight.data_ptr(), out.data_ptr(), cptr<int64_t>(indices),
               1, V, indices.numel(), D, device_of(weight), stream_of(weight));
}

void embedding_backward_kernel(const Tensor& grad_weight, const Tensor& grad,
                               const Tensor& indices) {
  const int64_t V = grad_weight.sizes()[0], D = grad_weight.sizes()[1];
  index_add(grad_weight.dtype(), grad_weight.data_ptr(), grad.data_ptr(), cptr<int64_t>(indices),
            1, V, indices.numel(), D, device_of(grad_weight), stream_of(grad_weight));
}

#ifndef LOOM_WITH_CUDA

namespace {
constexpr const char* kNoCuda =
    "loom was built without CUDA (no toolkit found at build time, or LOOM_DISABLE_CUDA=1)";
}  // namespace

void softmax_forward(DType, const void*, void*, int64_t, int64_t, int64_t, bool, int, uint64_t) {
  LOOM_FAIL("cuda::softmax_forward: ", kNoCuda);
}
void softmax_backward(DType, const void*, const void*, void*, int64_t, int64_t, int64_t, bool,
                      int, uint64_t) {
  LOOM_FAIL("cuda::softmax_backward: ", kNoCuda);
}
void dropout(DType, const void*, void*, void*, int64_t, double, uint64_t, uint64_t, int,
             uint64_t) {
  LOOM_FAIL("cuda::dropout: ", kNoCuda);
}
void class_loss_forward(DType, bool, const void*, const int64_t*, const void*, int64_t, int64_t,
                        int64_t, int64_t, double, void*, double*, void*, double*, bool, double*,
                        int, uint64_t) {
  LOOM_FAIL("cuda::class_loss_forward: ", kNoCuda);
}
void class_loss_backward(DType, bool, void*, const void*, bool, const double*, const void*,
                         const double*, const int64_t*, const void*, int64_t, int64_t, int64_t,
                         int64_t, double, double*, int, uint64_t) {
  LOOM_FAIL("cuda::class_loss_backward: ", kNoCuda);
}
void squared_error(DType, const void*, const void*, int64_t, bool, double, void*, double*, int,
                   uint64_t) {
  LOOM_FAIL("cuda::squared_error: ", kNoCuda);
}
void squared_error_backward(DType, void*, const void*, bool, double, const void*, const void*,
                            int64_t, int, uint64_t) {
  LOOM_FAIL("cuda::squared_error_backward: ", kNoCuda);
}
void find_bad_index(const int64_t*, int64_t, int64_t, bool, int64_t, int64_t*, int, uint64_t) {
  LOOM_FAIL("cuda::find_bad_index: ", kNoCuda);
}
void index_select(size_t, const void*, void*, const int64_t*, int64_t, int64_t, int64_t, int64_t,
                  int, uint64_t) {
  LOOM_FAIL("cuda::index_select: ", kNoCuda);
}
void index_add(DType, void*, const void*, const int64_t*, int64_t, int64_t, int64_t, int64_t, int,
               uint64_t) {
  LOOM_FAIL("cuda::index_add: ", kNoCuda);
}
void gather(size_t, void*, const void*, const int64_t*, const IndexLayout&, int, uint64_t) {
  LOOM_FAIL("cuda::gather: ", kNoCuda);
}
void scatter_add(DType, void*, const void*, const int64_t*, const IndexLayout&, int, uint64_t) {
  LOOM_FAIL("cuda::scatter_add: ", kNoCuda);
}
void sgd_step(DType, int, void* const*, const void* const*, void* const*, const bool*,
              const int64_t*, const SgdConstants&, int, uint64_t) {
  LOOM_FAIL("cuda::sgd_step: ", kNoCuda);
}
void adam_step(DType, int, void* const*, const void* const*, void* const*, void* const*,
               void* const*, const double*, const double*, const int64_t*, const AdamConstants&,
               int, uint64_t) {
  LOOM_FAIL("cuda::adam_step: ", kNoCuda);
}

#endif  // LOOM_WITH_CUDA

}  // namespace cuda
}  // namespace loom
