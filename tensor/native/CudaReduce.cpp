// The CUDA backend of the reductions: the cuda::*_kernel functions declared
// beside their CPU twins in Reduce.h.  native::sum/mean/max/min/argmax/argmin
// build the (outer, reduce, inner) ReduceView once for both backends (on CUDA
// the permute-and-contiguous runs as a strided-copy kernel); this forwards its
// contiguous block to the launchers of tensor/cuda/Reduce.h on the device's
// current stream.  Without CUDA the launchers are stubs that throw; the native
// ops never reach them, as check_kernel_device throws first.
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Reduce.h"
#include "tensor/native/Reduce.h"

namespace loom {
namespace cuda {

void sum_kernel(const Tensor& out, const native::ReduceView& v, bool mean) {
  const int device = out.device().index;
  sum(v.src.dtype(), v.src.data_ptr(), out.data_ptr(), v.outer, v.reduce, v.inner, mean, device,
      current_stream_handle(device));
}

void extremum_kernel(const Tensor& values, const Tensor& indices, const native::ReduceView& v,
                     bool is_max) {
  const int device = v.src.device().index;
  extremum(v.src.dtype(), v.src.data_ptr(), values.defined() ? values.data_ptr() : nullptr,
           indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr, v.outer,
           v.reduce, v.inner, is_max, device, current_stream_handle(device));
}

#ifndef LOOM_WITH_CUDA

namespace {
constexpr const char* kNoCuda =
    "loom was built without CUDA (no toolkit found at build time, or LOOM_DISABLE_CUDA=1)";
}  // namespace

void sum(DType, const void*, void*, int64_t, int64_t, int64_t, bool, int, uint64_t) {
  LOOM_FAIL("cuda::sum: ", kNoCuda);
}
void extremum(DType, const void*, void*, int64_t*, int64_t, int64_t, int64_t, bool, int,
              uint64_t) {
  LOOM_FAIL("cuda::extremum: ", kNoCuda);
}

#endif  // LOOM_WITH_CUDA

}  // namespace cuda
}  // namespace loom
