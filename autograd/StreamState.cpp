// Registers GradMode with tensor/Stream.h, so closures submitted to a stream
// run with the submitting thread's grad mode (forward ops run on cpu:1's
// stream record autograd history as they would on the caller).
#include "autograd/GradMode.h"
#include "tensor/Stream.h"

namespace loom {
namespace autograd {
namespace {

const bool g_grad_mode_registered = [] {
  register_stream_state({[] { return static_cast<int64_t>(GradMode::is_enabled()); },
                         [](int64_t v) { GradMode::set_enabled(v != 0); }});
  return true;
}();

}  // namespace
}  // namespace autograd
}  // namespace loom
