// Differentiable elementwise ops with NumPy broadcasting and type promotion.
// Tensor methods and operators (a + b, a * 2) forward here.  Shape mismatch
// throws naming both shapes; tensors on two devices throw naming both devices.
#pragma once

#include <optional>

#include "tensor/Tensor.h"

namespace loom {

// self + alpha * other.
Tensor add(const Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor add(const Tensor& self, Scalar other);
// self - alpha * other.
Tensor sub(const Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor sub(const Tensor& self, Scalar other);
// other - self (for `2 - t`).
Tensor rsub(const Tensor& self, Scalar other);
Tensor mul(const Tensor& self, const Tensor& other);
Tensor mul(const Tensor& self, Scalar other);
// True division: integer inputs give float32.
Tensor div(const Tensor& self, const Tensor& other);
Tensor div(const Tensor& self, Scalar other);
// other / self (for `1 / t`).
Tensor rdiv(const Tensor& self, Scalar other);
Tensor neg(const Tensor& self);
Tensor abs(const Tensor& self);
Tensor exp(const Tensor& self);
Tensor log(const Tensor& self);
Tensor sqrt(const Tensor& self);
Tensor rsqrt(const Tensor& self);
Tensor pow(const Tensor& self, Scalar exponent);
Tensor pow(const Tensor& self, const Tensor& exponent);
Tensor relu(const Tensor& self);
Tensor sigmoid(const Tensor& self);
Tensor tanh(const Tensor& self);
// Clamps to [min, max]; either bound may be absent.
Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
// condition ? self : other, broadcasting all three; condition is bool.
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);
// Elementwise max/min of two tensors (broadcasting).
Tensor maximum(const Tensor& self, const Tensor& other);
Tensor minimum(const Tensor& self, const Tensor& other);

// Comparisons return bool tensors and are not differentiable.
Tensor eq(const Tensor& self, const Tensor& other);
Tensor eq(const Tensor& self, Scalar other);
Tensor ne(const Tensor& self, const Tensor& other);
Tensor ne(const Tensor& self, Scalar other);
Tensor lt(const Tensor& self, const Tensor& other);
Tensor lt(const Tensor& self, Scalar other);
Tensor le(const Tensor& self, const Tensor& other);
Tensor le(const Tensor& self, Scalar other);
Tensor gt(const Tensor& self, const Tensor& other);
Tensor gt(const Tensor& self, Scalar other);
Tensor ge(const Tensor& self, const Tensor& other);
Tensor ge(const Tensor& self, Scalar other);

// True when every element of a and b (broadcast together, any dtypes) is
// within atol + rtol * |b|; nan is never close, equal infinities are.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// True when a and b have the same shape and equal values (dtypes may differ).
bool equal(const Tensor& a, const Tensor& b);

}  // namespace loom
