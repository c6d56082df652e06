// A batch-norm case whose channel 0 has a mean far larger than its spread
// (1000 and ~0.003, a ratio of 3e5), for the backward's cancellation tests
// on CPU (batchnorm_test) and CUDA (cuda_norm_pool_test).  Channel 0's values
// are 1000 plus multiples of 2^-12 that sum to zero, so its float32 mean is
// exact and batch norm in float64 on the same values is a fair reference;
// channel 1 is an ordinary channel.  The gradient follows x (as a loss of
// the output's does), so mean(dy * (x - mean)) -- the factor of the term that
// cancels in b * x - b * mean -- is large.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/Factory.h"
#include "tensor/Tensor.h"
#include "tensor/native/Normalization.h"

namespace loom {
namespace testing {

struct FarMeanCase {
  Tensor input, grad_output, weight;  // float32: (4, 2, 5, 6), (4, 2, 5, 6), (2)
};

inline FarMeanCase far_mean_case() {
  const int64_t N = 4, C = 2, S = 30;
  std::vector<double> x(N * C * S), g(N * C * S);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      // Batches 2 and 3 mirror 0 and 1, so channel 0's offsets sum to zero.
      const double k = static_cast<double>(((n % 2) * S + s) * 7 % 41 - 20);
      x[(n * C + 0) * S + s] = 1000.0 + (n < 2 ? k : -k) / 4096.0;
      x[(n * C + 1) * S + s] = static_cast<double>((n * S + s) * 11 % 29) / 29 - 0.5;
    }
  for (int64_t i = 0; i < N * C * S; ++i) {
    const bool far = i / S % C == 0;
    g[i] = static_cast<double>(i * 5 % 23) / 23 - 0.5 + (far ? (x[i] - 1000.0) * 200 : x[i]);
  }
  return {tensor<double>(x, {N, C, 5, 6}).to(kFloat32),
          tensor<double>(g, {N, C, 5, 6}).to(kFloat32), tensor<double>({1.5, -0.5}).to(kFloat32)};
}

// (grad_input, grad_weight, grad_bias) of training batch norm (no running
// statistics, no bias) in the inputs' dtype and on their device.
inline std::tuple<Tensor, Tensor, Tensor> batch_norm_gradients(const Tensor& input,
                                                               const Tensor& grad_output,
                                                               const Tensor& weight) {
  const auto fwd = native::batch_norm(input, Tensor(), Tensor(), weight, Tensor(), true, 0.1, 1e-5);
  Tensor gi, gw, gb;
  native::batch_norm_backward(grad_output, input, weight, std::get<1>(fwd), std::get<2>(fwd), true,
                              true, true, true, gi, gw, gb);
  return {gi, gw, gb};
}

// The largest |got - want| and the largest |want| over all elements.
inline std::pair<double, double> worst_error_and_scale(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return {worst, scale};
}

}  // namespace testing
}  // namespace loom
