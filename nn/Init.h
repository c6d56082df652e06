// nn::init: in-place initialisers with PyTorch's formulas.  They run under
// NoGradGuard and draw from `gen` or the default generator (manual_seed).
#pragma once

#include <string>
#include <utility>

#include "tensor/Generator.h"
#include "tensor/Tensor.h"

namespace loom {
namespace nn {
namespace init {

enum class FanMode { kFanIn, kFanOut };
enum class Nonlinearity { kLinear, kConv, kSigmoid, kTanh, kReLU, kLeakyReLU };

// (fan_in, fan_out) of a weight of rank >= 2: dims 1 and 0 times the
// receptive field.  Throws for rank < 2.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// The recommended gain for a nonlinearity (param: negative slope for leaky ReLU).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

Tensor& uniform_(Tensor& t, double low = 0, double high = 1, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// Uniform(-b, b) with b = gain * sqrt(3 / fan), gain from nonlinearity and a.
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::kFanIn,
                         Nonlinearity nonlinearity = Nonlinearity::kLeakyReLU,
                         Generator* gen = nullptr);
// Normal(0, std) with std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0, FanMode mode = FanMode::kFanIn,
                        Nonlinearity nonlinearity = Nonlinearity::kLeakyReLU,
                        Generator* gen = nullptr);
// Uniform(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1, Generator* gen = nullptr);

}  // namespace init
}  // namespace nn
}  // namespace loom
