#include "nn/Init.h"

#include <cmath>

#include "autograd/GradMode.h"
#include "tensor/Factory.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {
namespace init {

namespace {
// Writes `values` (same shape) into t without recording history.
Tensor& assign(Tensor& t, const Tensor& values) {
  autograd::NoGradGuard no_grad;
  native::copy_(t, values);
  return t;
}

void check_floating(const Tensor& t, const char* what) {
  LOOM_CHECK(t.defined(), "nn::init::", what, ": the tensor is undefined");
  LOOM_CHECK(t.is_floating_point(), "nn::init::", what, ": expected a floating tensor, got ",
             t.describe());
}
}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  LOOM_CHECK(t.dim() >= 2, "nn::init: fan in and fan out can not be computed for a tensor "
             "with fewer than 2 dimensions, got ", t.describe());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::kLinear:
    case Nonlinearity::kConv:
    case Nonlinearity::kSigmoid: return 1.0;
    case Nonlinearity::kTanh: return 5.0 / 3.0;
    case Nonlinearity::kReLU: return std::sqrt(2.0);
    case Nonlinearity::kLeakyReLU: return std::sqrt(2.0 / (1 + param * param));
  }
  return 1.0;
}

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  check_floating(t, "uniform_");
  LOOM_CHECK(low <= high, "nn::init::uniform_: expected low <= high, got ", low, " > ", high);
  autograd::NoGradGuard no_grad;
  return assign(t, rand(t.sizes(), TensorOptions(t.dtype()).device(t.device()), gen) *
                           (high - low) + low);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "normal_");
  LOOM_CHECK(std >= 0, "nn::init::normal_: std must be >= 0, got ", std);
  autograd::NoGradGuard no_grad;
  return assign(t, randn(t.sizes(), TensorOptions(t.dtype()).device(t.device()), gen) * std +
                       mean);
}

Tensor& constant_(Tensor& t, double value) {
  check_floating(t, "constant_");
  autograd::NoGradGuard no_grad;
  native::fill_(t, value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1); }

namespace {
int64_t fan(const Tensor& t, FanMode mode) {
  const auto [in, out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::kFanIn ? in : out;
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                         Generator* gen) {
  check_floating(t, "kaiming_uniform_");
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode)));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                        Generator* gen) {
  check_floating(t, "kaiming_normal_");
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode)));
  return normal_(t, 0, std, gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_uniform_");
  const auto [in, out] = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_normal_");
  const auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(in + out)), gen);
}

}  // namespace init
}  // namespace nn
}  // namespace loom
