#include "autograd/DeferWeightGrad.h"

#include "tensor/Stream.h"

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

}  // namespace autograd
}  // namespace loom
