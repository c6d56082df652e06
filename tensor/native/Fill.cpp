#include "tensor/native/Fill.h"

#include <cmath>
#include <cstring>
#include <mutex>

#include "tensor/Factory.h"
#include "tensor/native/Copy.h"
#include "tensor/native/CounterRandom.h"

namespace loom {
namespace native {
namespace {

void check_fill(const char* op, const Tensor& t) {
  check_defined(op, t, "self");
  LOOM_CHECK(t.is_floating_point(), op, ": expected a floating-point tensor, got ",
             t.describe());
  check_kernel_device(op, t);
}

// Writes draw() into every element of t in row-major order, drawing under
// gen's lock (one sequence per seed, whatever the thread count); from
// kCounterRandomMinNumel elements on, counter_fill(p, n, key) fills it on the
// intra-op threads instead, keyed by one draw (native/CounterRandom.h).  A CUDA
// tensor is filled from host memory (the same values as on the CPU for a
// seed; initialisation, not the training path).
template <typename Draw, typename CounterFill>
void fill_random(const Tensor& t, Generator& gen, Draw&& draw, const CounterFill& counter_fill) {
  Tensor dst =
      t.is_cpu() && t.is_contiguous() ? t : empty(t.sizes(), TensorOptions(t.dtype()));
  dispatch_all_dtypes(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(dst.data_ptr());
    const int64_t n = dst.numel();
    if (n >= kCounterRandomMinNumel) {
      counter_fill(p, n, counter_key(gen));
      return;
    }
    std::lock_guard<std::mutex> lock(gen.mutex());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(draw());
  });
  if (dst.is_same(t)) {
    t.bump_version();
  } else {
    copy_(t, dst);  // bumps the version
  }
}

}  // namespace

void zero_(const Tensor& t) {
  check_defined("zero_", t, "self");
  if (t.is_cpu() && t.is_contiguous()) {
    if (t.nbytes() > 0) std::memset(t.data_ptr(), 0, t.nbytes());
    t.bump_version();
    return;
  }
  fill_(t, 0);
}

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
  check_fill("uniform_", t);
  LOOM_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high,
             "uniform_: expected finite bounds with low <= high, got low=", low,
             " high=", high);
  const double range = high - low;
  fill_random(t, gen, [&] { return low + range * gen.uniform(); },
              [&](auto* p, int64_t n, uint64_t key) {
                counter_fill_uniform(p, n, key, [&](double u) { return low + range * u; });
              });
}

void normal_(const Tensor& t, double mean, double std, Generator& gen) {
  check_fill("normal_", t);
  LOOM_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0,
             "normal_: expected a finite mean and std >= 0, got mean=", mean, " std=", std);
  fill_random(t, gen, [&] { return mean + std * gen.normal(); },
              [&](auto* p, int64_t n, uint64_t key) { counter_fill_normal(p, n, key, mean, std); });
}

}  // namespace native
}  // namespace loom
