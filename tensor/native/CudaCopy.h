// Copies and fills where a CUDA tensor is involved; native::copy_ and
// native::fill_ (Copy.h) send every such case here.
//
// How a copy runs (dst and src already have the same shape and do not
// overlap):
//   - Same CUDA device, same dtype: one strided-copy kernel (or one
//     device-to-device memcpy when both are contiguous) on the device's
//     current stream; returns without waiting, as later work on that stream
//     is ordered after it.
//   - Across devices, same dtype: the source is made contiguous on its own
//     device, its bytes move with cudaMemcpyAsync on the CUDA device's
//     current stream, and a non-contiguous destination is filled from a
//     contiguous buffer on its own device.  The copy is waited for unless
//     non_blocking is set and the host side is memory from loom's pinned
//     allocator (cuda::pinned_empty; then the block is recorded on the
//     stream, so the allocator does not reuse it before the copy has run).  CUDA-to-CUDA across two GPUs always waits.
//   - Different dtypes: converted on the host (CPU kernels), then copied as
//     above.  (A CUDA conversion kernel comes with the elementwise ops.)
// Throws loom::Error naming the op and device for an invalid CUDA device, or
// when loom was built without CUDA.
#pragma once

#include "tensor/Scalar.h"
#include "tensor/Tensor.h"

namespace loom {
namespace native {

// dst <- src, at least one of them on a CUDA device.
void copy_cuda_(const Tensor& dst, const Tensor& src, bool non_blocking);
// Every element of the CUDA tensor t <- value (converted to t's dtype).
void fill_cuda_(const Tensor& t, Scalar value);

}  // namespace native
}  // namespace loom
