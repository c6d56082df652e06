// The CPU kernel of native::amp_unscale_ (AmpUnscale.h): one parallel loop
// per gradient, each element widened to float32 (float64 stays float64),
// checked, multiplied by inv_scale and rounded back.
#include <atomic>
#include <cmath>

#include "tensor/DType.h"
#include "tensor/Parallel.h"
#include "tensor/native/AmpUnscale.h"

namespace loom {
namespace cpu {
namespace {

template <typename T>
bool unscale(T* g, int64_t n, float inv) {
  using O = compute_type_t<T>;  // float, double for double
  std::atomic<bool> bad{false};
  parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
    bool local = false;
    for (int64_t i = b; i < e; ++i) {
      const O v = static_cast<O>(g[i]);
      local = local || !std::isfinite(v);
      if (inv != 1.0f) g[i] = static_cast<T>(v * static_cast<O>(inv));
    }
    if (local) bad.store(true, std::memory_order_relaxed);
  });
  return bad.load();
}

void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                        const Tensor& inv_scale) {
  const float inv = *static_cast<const float*>(inv_scale.data_ptr());
  bool bad = false;
  for (const Tensor& t : grads) {
    dispatch_all_floating(t.dtype(), "amp_unscale_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      bad = unscale(static_cast<T*>(t.data_ptr()), t.numel(), inv) || bad;
    });
  }
  if (bad) *static_cast<float*>(found_inf.data_ptr()) = 1.0f;
}

}  // namespace

static const native::RegisterKernel reg_amp_unscale(native::amp_unscale_stub, kCPU,
                                                    &amp_unscale_kernel);

}  // namespace cpu
}  // namespace loom
