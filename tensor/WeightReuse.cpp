#include "tensor/WeightReuse.h"

#include <atomic>

namespace loom {
namespace {

std::atomic<int64_t> g_reused{0}, g_made{0};

}  // namespace

WeightReuseStats weight_reuse_stats() { return {g_reused.load(), g_made.load()}; }

namespace detail {
void count_weight_reuse(bool reused) { ++(reused ? g_reused : g_made); }
}  // namespace detail

}  // namespace loom
