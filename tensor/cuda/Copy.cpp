// The CUDA kernels of native::copy_ and fill_ (Copy.h): every copy with a
// CUDA tensor on either side, and fills of CUDA tensors.
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
// Throws loom::Error naming the op and device for an invalid CUDA device.
#include <cstring>

#include "tensor/CudaGraph.h"
#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/DeferredChecks.h"
#include "tensor/Factory.h"
#include "tensor/Stream.h"
#include "tensor/cuda/Convert.h"
#include "tensor/cuda/Copy.h"
#include "tensor/cuda/StreamEvent.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace cuda {
namespace {

void check_cuda_side(const char* op, const Tensor& t) {
  if (t.is_cuda()) cuda::check_device(t.device().index, op);
}

Tensor empty_on(const Tensor& like, DType dtype, Device device) {
  return empty(like.sizes(), TensorOptions(dtype).device(device));
}

// dst <- src on one CUDA device, same dtype, any layouts: one kernel.
void copy_within_device(const Tensor& dst, const Tensor& src) {
  const int device = dst.device().index;
  const uint64_t stream = cuda::current_stream_handle(device);
  if (dst.is_contiguous() && src.is_contiguous()) {
    cuda::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(), device, stream);
    return;
  }
  cuda::strided_copy(dst.data_ptr(), dst.strides().data(), src.data_ptr(), src.strides().data(),
                     dst.sizes().data(), static_cast<int>(dst.dim()), dst.element_size(), device,
                     stream);
}

// src itself when contiguous, else a contiguous copy on src's own device.
Tensor contiguous_here(const Tensor& src) {
  if (src.is_contiguous()) return src;
  Tensor out = empty_on(src, src.dtype(), src.device());
  if (src.is_cuda())
    copy_within_device(out, src);
  else
    native::copy_(out, src);
  return out;
}

// Work queued on stream `waiter` of device `wd` after this call waits for
// the work queued on stream `producer` of device `pd` so far (one event,
// destroyed at once: CUDA releases it when it has completed).
void order_after(int wd, uint64_t waiter, int pd, uint64_t producer) {
  if (wd == pd && waiter == producer) return;  // one stream: in order already
  void* event = cuda::event_create(pd, /*timing=*/false);
  try {
    cuda::event_record(event, pd, producer);
    cuda::stream_wait_event(wd, waiter, event);
  } catch (...) {
    cuda::event_destroy(event);
    throw;
  }
  cuda::event_destroy(event);
}

uint64_t copy_stream_of(int device) {
  return Stream::copy_stream(Device(kCUDA, device)).native_handle();
}

// Contiguous bytes from one device to another (at least one CUDA), same
// dtype: the hand-over contract (see the top of this file).
void transfer(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (dst.is_cuda() && src.is_cuda()) {
    const int from = src.device().index, to = dst.device().index;
    const uint64_t producer = cuda::current_stream_handle(from);
    const uint64_t consumer = cuda::current_stream_handle(to);
    const uint64_t copy = copy_stream_of(to);
    order_after(to, copy, from, producer);  // src is written
    order_after(to, copy, to, consumer);    // dst's block is no longer in use
    cuda::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(), to, copy);
    order_after(to, consumer, to, copy);    // the consumer reads dst after it
    // Always: src's block belongs to a stream of the other device, never to
    // `copy`, even when the copy stream is the consumer's current stream (a
    // pipeline's copy closure); record_stream ignores a block's own stream.
    cuda::record_stream(src.storage(), copy);
    return;
  }
  const Tensor& gpu = dst.is_cuda() ? dst : src;
  const Tensor& host = dst.is_cuda() ? src : dst;
  const int device = gpu.device().index;
  const uint64_t current = cuda::current_stream_handle(device);
  if (non_blocking && cuda::from_pinned_allocator(host.storage())) {
    // Asynchronous, on the device's copy stream, ordered against the current
    // stream both ways.  The pinned block (and the device block, for
    // device-to-host) must not be reused before the copy has run.
    const uint64_t copy = copy_stream_of(device);
    order_after(device, copy, device, current);
    cuda::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(), device, copy);
    order_after(device, current, device, copy);
    // Always, even when the copy stream is current: the pinned block belongs
    // to the host pool, and a device source may have been allocated on
    // another stream (record_stream ignores a block's own stream).
    cuda::record_stream(host.storage(), copy);
    if (src.is_cuda()) cuda::record_stream(src.storage(), copy);
    return;
  }
  // Blocking (or pageable host memory, which CUDA cannot copy behind the
  // host's back anyway): on the current stream, waited for.
  cuda::check_not_capturing(device, "a copy between the host and cuda (item(), cpu(), to())",
                            "it waits for the device");
  cuda::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(), device, current);
  cuda::stream_synchronize(device, current);
  raise_deferred_errors();  // the host waited anyway: report failed checks
}

void copy_kernel(const Tensor& dst, const Tensor& src, bool non_blocking) {
  check_cuda_side("copy_", dst);
  check_cuda_side("copy_", src);
  if (dst.numel() == 0) return;
  if (dst.dtype() != src.dtype()) {
    if (dst.device() == src.device()) {
      cuda::convert_kernel(dst, src);
      return;
    }
    if (src.is_cuda()) {
      // Convert on the source's GPU, then move the converted bytes.
      Tensor converted = empty_on(src, dst.dtype(), src.device());
      cuda::convert_kernel(converted, src);
      copy_kernel(dst, converted, non_blocking);
      return;
    }
    // Host source, GPU destination: move src's bytes, convert on the GPU.
    Tensor moved = empty_on(src, src.dtype(), dst.device());
    copy_kernel(moved, src, non_blocking);
    cuda::convert_kernel(dst, moved);
    return;
  }
  if (dst.device() == src.device()) {
    copy_within_device(dst, src);
    return;
  }
  const Tensor s = contiguous_here(src);
  const Tensor d = dst.is_contiguous() ? dst : empty_on(dst, dst.dtype(), dst.device());
  transfer(d, s, non_blocking && d.is_same(dst));
  if (d.is_same(dst)) return;
  if (dst.is_cuda())
    copy_within_device(dst, d);
  else
    native::copy_(dst, d);
}

void fill_kernel(const Tensor& t, Scalar value) {
  check_cuda_side("fill_", t);
  uint64_t pattern = 0;
  dispatch_all_dtypes(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = static_cast<T>(value.to_double());
    static_assert(sizeof(T) <= sizeof(pattern), "element wider than the fill pattern");
    std::memcpy(&pattern, &v, sizeof(T));
  });
  const int device = t.device().index;
  cuda::strided_fill(t.data_ptr(), t.strides().data(), t.sizes().data(),
                     static_cast<int>(t.dim()), t.element_size(), &pattern, device,
                     cuda::current_stream_handle(device));
}

}  // namespace

static const native::RegisterKernel reg_copy(native::copy_stub, kCUDA, &copy_kernel);
static const native::RegisterKernel reg_fill(native::fill_stub, kCUDA, &fill_kernel);

}  // namespace cuda
}  // namespace loom
