#include "tensor/native/CudaCopy.h"

#include <cstring>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Factory.h"
#include "tensor/cuda/Copy.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {
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
    copy_(out, src);
  return out;
}

// Contiguous bytes from one device to another (at least one CUDA), same dtype.
void transfer(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (dst.is_cuda() && src.is_cuda()) {
    // Two GPUs: the source's pending work must be done before the peer copy,
    // and the copy is waited for (neither stream orders the other).
    const int from = src.device().index, to = dst.device().index;
    cuda::stream_synchronize(from, cuda::current_stream_handle(from));
    const uint64_t stream = cuda::current_stream_handle(to);
    cuda::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(), to, stream);
    cuda::stream_synchronize(to, stream);
    return;
  }
  const Tensor& gpu = dst.is_cuda() ? dst : src;
  const Tensor& host = dst.is_cuda() ? src : dst;
  const int device = gpu.device().index;
  const uint64_t stream = cuda::current_stream_handle(device);
  cuda::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(), device, stream);
  if (non_blocking && cuda::from_pinned_allocator(host.storage())) {
    // Asynchronous: the pinned block must not be reused before the copy has
    // run.  (Other page-locked memory cannot be tracked: that copy waits.)
    cuda::DeviceGuard guard(device);  // the event goes on this device's stream
    cuda::record_stream(host.storage(), stream);
    return;
  }
  cuda::stream_synchronize(device, stream);
}

}  // namespace

void copy_cuda_(const Tensor& dst, const Tensor& src, bool non_blocking) {
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
      copy_cuda_(dst, converted, non_blocking);
      return;
    }
    // Host source, GPU destination: move src's bytes, convert on the GPU.
    Tensor moved = empty_on(src, src.dtype(), dst.device());
    copy_cuda_(moved, src, non_blocking);
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
    copy_(dst, d);
}

void fill_cuda_(const Tensor& t, Scalar value) {
  check_cuda_side("fill_", t);
  uint64_t pattern = 0;
  dispatch_dtype(t.dtype(), [&](auto tag) {
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

}  // namespace native
}  // namespace loom
