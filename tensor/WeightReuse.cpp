#include "tensor/WeightReuse.h"

#include <atomic>

#include "tensor/Stream.h"

namespace loom {
namespace {

thread_local bool t_weight_reuse = false;
std::atomic<int64_t> g_reused{0}, g_made{0};

// Closures submitted to a stream run as their submitter would.
const bool g_registered = [] {
  register_stream_state({[] { return static_cast<int64_t>(WeightReuse::is_enabled()); },
                         [](int64_t v) { WeightReuse::set_enabled(v != 0); }});
  return true;
}();

}  // namespace

bool WeightReuse::is_enabled() {
  (void)g_registered;
  return t_weight_reuse;
}
void WeightReuse::set_enabled(bool enabled) { t_weight_reuse = enabled; }

WeightReuseStats weight_reuse_stats() { return {g_reused.load(), g_made.load()}; }

namespace detail {
void count_weight_reuse(bool reused) { ++(reused ? g_reused : g_made); }
}  // namespace detail

}  // namespace loom
