#include "tensor/native/Fill.h"

#include <cmath>
#include <cstring>
#include <mutex>

#include "tensor/Factory.h"
#include "tensor/native/Copy.h"

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
// gen's lock (one sequence per seed, whatever the thread count).  A CUDA
// tensor is filled from host memory (the same values as on the CPU for a
// seed; initialisation, not the training path).
template <typename Draw>
void fill_random(const Tensor& t, Generator& gen, Draw&& draw) {
  Tensor dst =
      t.is_cpu() && t.is_contiguous() ? t : empty(t.sizes(), TensorOptions(t.dtype()));
  dispatch_floating(t.dtype(), "fill_random", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(dst.data_ptr());
    const int64_t n = dst.numel();
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
  fill_random(t, gen, [&] { return low + range * gen.uniform(); });
}

void normal_(const Tensor& t, double mean, double std, Generator& gen) {
  check_fill("normal_", t);
  LOOM_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0,
             "normal_: expected a finite mean and std >= 0, got mean=", mean, " std=", std);
  fill_random(t, gen, [&] { return mean + std * gen.normal(); });
}

}  // namespace native
}  // namespace loom
