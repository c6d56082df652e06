#include "autograd/DeferWeightGrad.h"

#include "tensor/Stream.h"
#include "tensor/native/Join.h"

namespace loom {
namespace autograd {
namespace {

thread_local bool t_defer_weight_grad = false;

// Closures submitted to a stream record as their submitter would.
const bool g_registered = [] {
  register_stream_state({[] { return static_cast<int64_t>(DeferWeightGrad::is_enabled()); },
                         [](int64_t v) { DeferWeightGrad::set_enabled(v != 0); }});
  return true;
}();

}  // namespace

bool DeferWeightGrad::is_enabled() {
  (void)g_registered;
  return t_defer_weight_grad;
}
void DeferWeightGrad::set_enabled(bool enabled) { t_defer_weight_grad = enabled; }

bool stacks_along_batch(const Tensor& a, const Tensor& b, int64_t min_dim) {
  if (a.dim() != b.dim() || a.dim() < min_dim || a.dtype() != b.dtype() ||
      a.device() != b.device())
    return false;
  for (int64_t d = 1; d < a.dim(); ++d)
    if (a.size(d) != b.size(d)) return false;
  return true;
}

Tensor cat_batches(const std::vector<Tensor>& tensors) { return native::cat(tensors, 0); }

}  // namespace autograd
}  // namespace loom
