// The CUDA kernel of native::dropout: one launch drawing the keep-mask from
// the seed (Philox, Dropout.h), refused inside a graph capture.
#include "tensor/CudaGraph.h"
#include "tensor/cuda/Dropout.h"
#include "tensor/cuda/HostUtil.h"
#include "tensor/native/Dropout.h"

namespace loom {
namespace cuda {
namespace {

void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& x, double p,
                    uint64_t seed) {
  check_not_capturing(device_of(x), "dropout",
                      "its seed is drawn on the host, so every replay would repeat one mask");
  dropout(x.dtype(), x.data_ptr(), out.data_ptr(), mask.data_ptr(), x.numel(), p, seed, 0,
          device_of(x), stream_of(x));
}

}  // namespace

static const native::RegisterKernel reg_dropout(native::dropout_stub, kCUDA, &dropout_kernel);

}  // namespace cuda
}  // namespace loom
