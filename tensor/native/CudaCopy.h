// Copies and fills where a CUDA tensor is involved; native::copy_ and
// native::fill_ (Copy.h) send every such case here.
//
// How a copy runs (dst and src already have the same shape and do not
// overlap):
//   - Same CUDA device, same dtype: one strided-copy kernel (or one
//     device-to-device memcpy when both are contiguous) on the device's
//     current stream; returns without waiting, as later work on that stream
//     is ordered after it.
//   - Across devices, same dtype (the hand-over contract, issue 6): the
//     source is made contiguous on its own device (current stream), and its
//     bytes move with cudaMemcpyAsync; a non-contiguous destination is filled
//     from a contiguous buffer on its own device.
//       CUDA to CUDA (cuda:i -> cuda:j): the copy runs on cuda:j's copy
//       stream after an event recorded on cuda:i's current stream (the
//       producer) and one on cuda:j's current stream (the consumer, which
//       allocated dst: its earlier work on that block must be done), and
//       cuda:j's current stream waits on the copy's event.  src's block is
//       recorded on the copy stream (record_stream), so freeing src at once
//       is safe.  The host never waits.
//       Host and CUDA with non_blocking and host memory from loom's pinned
//       allocator (cuda::pinned_empty): the same on the CUDA device's copy
//       stream, ordered after and before its current stream; the pinned block
//       (and a device source) is recorded on the copy stream.  The host does
//       not wait: synchronize the current stream before reading a host
//       destination.
//       Otherwise (blocking, or pageable host memory): on the CUDA device's
//       current stream, and waited for.
//     "Current" means the calling thread's (tensor/Stream.h: a StreamGuard,
//     or the stream whose closure is running).
//   - Different dtypes: converted on the GPU by one elementwise kernel
//     (tensor/cuda/Convert.cu, any layouts): on the same device directly;
//     across devices the bytes move first in the source dtype to the
//     destination's GPU (host to GPU), or the source is converted on its own
//     GPU first (GPU to host or GPU to GPU), so the host never converts.
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

namespace cuda {
// out <- in converted to out's dtype, both on one CUDA device and of one
// shape, any layouts (tensor/native/CudaElementwise.cpp, kernels in
// tensor/cuda/Convert.cu), queued on the device's current stream.
void convert_kernel(const Tensor& out, const Tensor& in);
}  // namespace cuda
}  // namespace loom
