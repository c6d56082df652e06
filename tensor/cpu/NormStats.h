// The statistics layer norm and group norm share on the CPU: the mean and
// 1 / sqrt(biased variance + eps) of one contiguous run of values.
//
// Two passes over the run (it is in cache for the second): the mean, then the
// squared deviations from it, both summed in double, so a mean far from 0
// does not cancel the variance away (sum(x^2) - n * mean^2 would).  Both
// loops vectorise (float32 widens to double lane by lane).
#pragma once

#include <cmath>
#include <cstdint>

namespace loom {
namespace cpu {

struct Moments {
  double mean = 0;
  double rstd = 0;
};

// An empty run has mean 0 and variance 0 (rstd = 1 / sqrt(eps)).
template <typename T>
Moments moments(const T* x, int64_t n, double eps) {
  Moments m;
  if (n > 0) {
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
    m.mean = sum / static_cast<double>(n);
  }
  const double mu = m.mean;
  double sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mu;
    sq += d * d;
  }
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  m.rstd = 1.0 / std::sqrt(var + eps);
  return m;
}

}  // namespace cpu
}  // namespace loom
