// Scalar: a number argument (`t + 2`, `t * 0.5`) that remembers whether it
// was written as an integer, so `int_tensor + 2` stays integral while
// `int_tensor + 0.5` promotes to float, as in PyTorch.
#pragma once

#include <cstdint>
#include <type_traits>

namespace loom {

class Scalar {
 public:
  Scalar() = default;
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T v)  // NOLINT: implicit like at::Scalar
      : value_(static_cast<double>(v)), integral_(std::is_integral_v<T>) {}

  double to_double() const { return value_; }
  int64_t to_int() const { return static_cast<int64_t>(value_); }
  bool is_integral() const { return integral_; }

 private:
  double value_ = 0;
  bool integral_ = false;
};

}  // namespace loom
