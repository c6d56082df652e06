// What layer norm and group norm share on the CPU: the statistics of one
// contiguous run of values, and the rule that keeps float32 accurate when
// the mean is large against the spread.
//
// Statistics: two passes over the run (it is in cache for the second): the
// mean, then the squared deviations from it, both summed in double, so a mean
// far from 0 does not cancel the variance away (sum(x^2) - n * mean^2 would).
// Both loops vectorise (float32 widens to double lane by lane).
//
// The stored mean.  The ops hand the mean back in the input's dtype (as
// ATen's native_layer_norm does), so in float32 it is off the true mean by a
// rounding error dm, up to half an ulp of the mean.  Every kernel therefore
// centres a value as (x - mean) - dm: x - mean is exact when x is near the
// mean (Sterbenz), and dm removes the rounding.  Without it a row whose spread
// is small against its mean loses the digits that matter: the output is off
// by rstd * dm, and dx, whose x-coefficient scales with rstd^3, by about
// rstd^2 * dm * |g|.  The forward knows the double mean (dm = mean - (T)mean);
// the backward, which gets the rounded one, recovers dm as the mean of
// x - (T)mean over the row (centred_sum).  In float64 dm is 0 (up to
// rounding of the sum).  CUDA uses the same rule (tensor/cuda/NormReduce.cuh).
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

// sum_i (x[i] - mean) in double, for a stored `mean` of x's dtype: n times
// the rounding error dm of that mean (see above).
template <typename T>
double centred_sum(const T* x, int64_t n, T mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i] - mean);
  return s;
}

}  // namespace cpu
}  // namespace loom
