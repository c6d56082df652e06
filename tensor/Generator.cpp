#include "tensor/Generator.h"

#include <cmath>

#include "tensor/Error.h"

namespace loom {

void Generator::manual_seed(uint64_t seed) {
  seed_ = seed;
  engine_.seed(seed);
  has_cached_normal_ = false;
}

uint64_t Generator::next_u64() { return engine_(); }

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  if (has_cached_normal_) {
    has_cached_normal_ = false;
    return cached_normal_;
  }
  double u1 = uniform();
  const double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  cached_normal_ = r * std::sin(theta);
  has_cached_normal_ = true;
  return r * std::cos(theta);
}

int64_t Generator::randint(int64_t low, int64_t high) {
  LOOM_CHECK(high > low, "randint: expected low < high, got low=", low, " high=", high);
  const uint64_t range = static_cast<uint64_t>(high - low);
  // Rejection sampling keeps the distribution exactly uniform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return low + static_cast<int64_t>(x % range);
}

namespace {
thread_local Generator* tls_generator_override = nullptr;
}  // namespace

Generator& default_generator() {
  if (tls_generator_override != nullptr) return *tls_generator_override;
  static Generator g;
  return g;
}

GeneratorGuard::GeneratorGuard(Generator* gen) : previous_(tls_generator_override) {
  LOOM_CHECK(gen != nullptr, "GeneratorGuard: the generator is null");
  tls_generator_override = gen;
}

GeneratorGuard::~GeneratorGuard() { tls_generator_override = previous_; }

void manual_seed(uint64_t seed) {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.manual_seed(seed);
}

}  // namespace loom
