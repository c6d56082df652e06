// The CPU kernel of native::amp_unscale_ (AmpUnscale.h): one parallel loop
// per gradient, each element widened to float32 (float64 stays float64),
// checked, multiplied by inv_scale and rounded back.
#include <atomic>
#include <cmath>

#include "tensor/Half.h"
#include "tensor/Parallel.h"
#include "tensor/native/AmpUnscale.h"

namespace loom {
namespace cpu {
namespace {

// The arithmetic type of a gradient dtype: float, double for double.
template <typename T>
using OpMath = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
bool unscale(T* g, int64_t n, float inv) {
  using O = OpMath<T>;
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
    const int64_t n = t.numel();
    switch (t.dtype()) {
      case kFloat32: bad = unscale(static_cast<float*>(t.data_ptr()), n, inv) || bad; break;
      case kFloat64: bad = unscale(static_cast<double*>(t.data_ptr()), n, inv) || bad; break;
      case kFloat16: bad = unscale(static_cast<Half*>(t.data_ptr()), n, inv) || bad; break;
      case kBFloat16: bad = unscale(static_cast<BFloat16*>(t.data_ptr()), n, inv) || bad; break;
      default: LOOM_FAIL("amp_unscale_: no kernel for ", t.describe());
    }
  }
  if (bad) *static_cast<float*>(found_inf.data_ptr()) = 1.0f;
}

}  // namespace

static const native::RegisterKernel reg_amp_unscale(native::amp_unscale_stub, kCPU,
                                                    &amp_unscale_kernel);

}  // namespace cpu
}  // namespace loom
