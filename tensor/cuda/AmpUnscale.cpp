// The CUDA kernel slot of native::amp_unscale_: the gradients grouped by
// dtype, each group handed to the multi-tensor launcher (AmpUnscale.cu) on
// the device's current stream.
#include <map>
#include <vector>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/AmpUnscale.h"
#include "tensor/native/AmpUnscale.h"

namespace loom {
namespace cuda {
namespace {

void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                        const Tensor& inv_scale) {
  std::map<DType, std::pair<std::vector<void*>, std::vector<int64_t>>> by_dtype;
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    auto& [ptrs, numels] = by_dtype[g.dtype()];
    ptrs.push_back(g.data_ptr());
    numels.push_back(g.numel());
  }
  const int device = found_inf.device().index;
  for (auto& [dtype, lists] : by_dtype)
    amp_unscale(dtype, static_cast<int>(lists.first.size()), lists.first.data(),
                lists.second.data(), static_cast<float*>(found_inf.data_ptr()),
                static_cast<const float*>(inv_scale.data_ptr()), device,
                current_stream_handle(device));
}

}  // namespace

static const native::RegisterKernel reg_amp_unscale(native::amp_unscale_stub, kCUDA,
                                                    &amp_unscale_kernel);

}  // namespace cuda
}  // namespace loom
