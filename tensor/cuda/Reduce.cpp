// The CUDA backend of the reductions: kernels for the dispatch slots of
// native/Reduce.h (the backward of max/min along a dim is in Index.cpp).
// native::sum/mean/max/min/argmax/argmin build the (outer, reduce, inner) ReduceView once for both backends (on CUDA
// the permute-and-contiguous runs as a strided-copy kernel); this forwards its
// contiguous block to the launchers of tensor/cuda/Reduce.h on the device's
// current stream.
#include <algorithm>

#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/cuda/Reduce.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Unary.h"
#include "tensor/native/Views.h"

namespace loom {
namespace cuda {

namespace {
// Device memory for the chunks' partial results of a reduction of v (an
// undefined tensor when the plan needs none).  Freed to the caching
// allocator on return, as every temporary is: only later work on the same
// stream, which runs after these kernels, can reuse it.
Tensor reduce_scratch(const native::ReduceView& v) {
  const int64_t bytes =
      reduce_scratch_bytes(v.outer, v.reduce, v.inner, v.src.device().index);
  if (bytes == 0) return Tensor();
  return empty({(bytes + 7) / 8}, TensorOptions(kFloat64).device(v.src.device()));
}

void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
}  // namespace

void sum_kernel(const Tensor& out, const native::ReduceView& v, bool mean) {
  const int device = out.device().index;
  const Tensor scratch = reduce_scratch(v);
  sum(v.src.dtype(), v.src.data_ptr(), out.data_ptr(), v.outer, v.reduce, v.inner, mean,
      ptr(scratch), device, current_stream_handle(device));
}

void extremum_kernel(const Tensor& values, const Tensor& indices, const native::ReduceView& v,
                     bool is_max) {
  const int device = v.src.device().index;
  const Tensor scratch = reduce_scratch(v);
  extremum(v.src.dtype(), v.src.data_ptr(), values.defined() ? values.data_ptr() : nullptr,
           indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr, v.outer,
           v.reduce, v.inner, is_max, ptr(scratch), device, current_stream_handle(device));
}

// var/std along the reduced dims: the CPU kernel's two passes in double, as
// CUDA ops (the means, then the squared deviations from them).
void var_kernel(const Tensor& out, const native::ReduceView& v, int64_t correction,
                bool take_sqrt) {
  const Tensor x = native::to(native::reshape(v.src, {v.outer, v.reduce, v.inner}),
                              v.src.device(), kFloat64);
  const Tensor d =
      native::binary(native::binary_op<optable::Sub>(), x, native::mean(x, {1}, true));
  Tensor s = native::sum(native::binary(native::binary_op<optable::Mul>(), d, d), {1}, false);
  const double divisor = static_cast<double>(std::max<int64_t>(0, v.reduce - correction));
  s = native::binary(native::binary_op<optable::Div>(), s,
                     scalar_tensor(divisor, TensorOptions(kFloat64).device(s.device())));
  if (take_sqrt) s = native::unary(native::unary_op<optable::Sqrt>(), s);
  native::copy_(out, native::reshape(s, out.sizes()));
}

static const native::RegisterKernel reg_sum(native::sum_stub, kCUDA, &sum_kernel);
static const native::RegisterKernel reg_var(native::var_stub, kCUDA, &var_kernel);
static const native::RegisterKernel reg_extremum(native::extremum_stub, kCUDA, &extremum_kernel);

}  // namespace cuda
}  // namespace loom
