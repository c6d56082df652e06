// The CUDA kernels of the index ops (native/Index.h, Embedding.h, and the
// backward of max/min along a dim in Reduce.h): raw pointers and layouts for
// the launchers of Index.h on the device's current stream.  Every kernel
// first queues a device-side check of its index values (check_index_values:
// the CPU kernels' message for the first bad one, raised at the next sync
// point) and then skips bad values, never touching memory outside its
// tensors.  index_add and scatter_add accumulate with atomics (float sums of
// repeated indices may round in any order).
#include "tensor/cuda/HostUtil.h"
#include "tensor/cuda/Index.h"
#include "tensor/native/Embedding.h"
#include "tensor/native/Index.h"
#include "tensor/native/Reduce.h"

namespace loom {
namespace cuda {
namespace {

// (outer, size, inner) of a contiguous tensor around dim.
void split_at(const Tensor& t, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.sizes()[d];
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.sizes()[d];
}

// The CPU kernels' message for the first out-of-range index, deferred.
void check_indices(const char* op, const Tensor& idx, int64_t dim, int64_t size) {
  native::check_index_values(idx, size, false, 0, [op, dim, size](int64_t bad) {
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

}  // namespace

static const native::RegisterKernel reg_index_select(native::index_select_stub, kCUDA,
                                                     &index_select_kernel);
static const native::RegisterKernel reg_index_add(native::index_add_stub, kCUDA, &index_add_kernel);
static const native::RegisterKernel reg_gather(native::gather_stub, kCUDA, &gather_kernel);
static const native::RegisterKernel reg_scatter_add(native::scatter_add_stub, kCUDA,
                                                    &scatter_add_kernel);
static const native::RegisterKernel reg_scatter_reduced(native::scatter_reduced_stub, kCUDA,
                                                        &scatter_reduced_kernel);
static const native::RegisterKernel reg_embedding(native::embedding_stub, kCUDA, &embedding_kernel);
static const native::RegisterKernel reg_embedding_backward(native::embedding_backward_stub, kCUDA,
                                                           &embedding_backward_kernel);

}  // namespace cuda
}  // namespace loom
