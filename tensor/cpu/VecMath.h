// Vectorised float32 exp (and sigmoid on top of it) for AVX2+FMA CPUs.
//
// exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln(2)/2 (ln 2 in
// two parts so r is exact), exp(r) by a degree-7 polynomial, and 2^n applied
// as two exact power-of-two factors so that results that underflow to
// denormals are still rounded correctly.  Within about 1 ulp of the exact
// result (checked on a sample of 70M floats spread over the whole range);
// inf, -inf (-> 0) and nan behave as std::exp.  Faster than Eigen's exp
// (about 1.3x), which also clamps its results to >= 1e-38.  Callers fall
// back to other implementations where LOOM_VEC_MATH is not defined.
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LOOM_VEC_MATH 1

namespace loom {
namespace cpu {

inline __m256 exp256(__m256 x) {
  // Beyond these every result is inf or 0; clamping keeps n in [-150, 129].
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)),
                                  _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, with ln2 = 0.693359375 - 2.12194440e-4 (the first part exact in 9 bits).
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // exp(r) = 1 + r + r^2 (1/2 + r (1/6 + r (1/24 + ...))), Cephes' minimax coefficients.
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // 2^n = 2^n1 * 2^n2 with n1 = n >> 1, both factors normal floats.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  // nan in, nan out (the clamps above replaced it).
  return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// 1 / (1 + exp(-x)).
inline __m256 sigmoid256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

// o[i] = f(in[i]) over n contiguous floats (o may be in), f one of the
// functions above.
template <typename F>
void map_f32(float* o, const float* in, int64_t n, F f) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(o + k, f(_mm256_loadu_ps(in + k)));
  const int rest = static_cast<int>(n - k);
  if (rest > 0) {  // the tail through a padded vector
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < rest && j < 8; ++j) buf[j] = in[k + j];
    _mm256_store_ps(buf, f(_mm256_load_ps(buf)));
    for (int j = 0; j < rest && j < 8; ++j) o[k + j] = buf[j];
  }
}

}  // namespace cpu
}  // namespace loom

#endif  // __AVX2__ && __FMA__
