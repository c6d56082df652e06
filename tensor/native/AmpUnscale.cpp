#include "tensor/native/AmpUnscale.h"

#include <string>

#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<AmpUnscaleKernel> amp_unscale_stub("amp_unscale_");

namespace {

void check_flag(const Tensor& t, const char* name, const Device& device) {
  LOOM_CHECK(t.defined() && t.dtype() == kFloat32 && t.numel() == 1,
             "amp_unscale_: expected ", name, " to be a float32 tensor of one element, got ",
             t.defined() ? t.describe() : std::string("an undefined tensor"));
  LOOM_CHECK(t.device() == device, "amp_unscale_: ", name, " is on ", t.device().str(),
             ", the gradients on ", device.str());
}

}  // namespace

void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                  const Tensor& inv_scale) {
  if (grads.empty()) return;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    LOOM_CHECK(g.defined(), "amp_unscale_: gradient ", i, " is undefined");
    LOOM_CHECK(g.is_floating_point(), "amp_unscale_: gradient ", i,
               " must be floating-point, got ", g.describe());
    LOOM_CHECK(g.device() == grads[0].device(), "amp_unscale_: gradient ", i, " is on ",
               g.device().str(), ", gradient 0 on ", grads[0].device().str(),
               " (one call per device)");
  }
  const Device device = grads[0].device();
  check_flag(found_inf, "found_inf", device);
  check_flag(inv_scale, "inv_scale", device);
  check_kernel_device("amp_unscale_", grads[0]);
  std::vector<Tensor> dense;
  std::vector<size_t> copied;  // indices whose kernel operand is a contiguous copy
  for (size_t i = 0; i < grads.size(); ++i) {
    // Elementwise, so any dense layout runs as it is (numel elements from
    // data_ptr): contiguous or channels last (a convolution's weight gradient).
    if (grads[i].is_contiguous() || grads[i].is_contiguous(MemoryFormat::kChannelsLast)) {
      dense.push_back(grads[i]);
    } else {
      dense.push_back(contiguous(grads[i]));
      copied.push_back(i);
    }
  }
  amp_unscale_stub(device, dense, contiguous(found_inf), contiguous(inv_scale));
  for (size_t i : copied) copy_(grads[i], dense[i]);
  for (const Tensor& g : grads) g.bump_version();
}

}  // namespace native
}  // namespace loom
