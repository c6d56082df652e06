// Differentiable elementwise ops with NumPy broadcasting and type promotion.
// Tensor methods and operators (a + b, a * 2) forward here.  Shape mismatch
// throws naming both shapes; tensors on two devices throw naming both devices.
// Bool tensors throw in arithmetic (mul, maximum and minimum of two bool
// tensors are logical and/or).  In-place forms (Tensor::add_, ...) may narrow
// the result within its category (float64 into float32), not across it.
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
// Negation and |x|; integer tensors stay integral, bool tensors throw.
Tensor neg(const Tensor& self);
Tensor abs(const Tensor& self);
// exp, log, sqrt, 1/sqrt, sigmoid and tanh compute integer and bool tensors
// as float32 (torch.sqrt(int tensor) is float).
Tensor exp(const Tensor& self);
Tensor log(const Tensor& self);
Tensor sqrt(const Tensor& self);
Tensor rsqrt(const Tensor& self);
// self ** exponent.  An integer tensor stays integral for an integral
// exponent (a negative one throws) and gives float32 for a fractional one.
Tensor pow(const Tensor& self, Scalar exponent);
// self ** exponent elementwise, broadcasting; the gradient for the exponent
// is taken as 0 where self == 0 and exponent >= 0.
Tensor pow(const Tensor& self, const Tensor& exponent);
// max(x, 0); integer tensors stay integral.
Tensor relu(const Tensor& self);
Tensor sigmoid(const Tensor& self);
Tensor tanh(const Tensor& self);
// Clamps to [min, max]; either bound may be absent, not both (throws).  The
// gradient passes where min <= x <= max.  min > max gives max everywhere.
Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
// condition ? self : other, broadcasting all three; condition must be bool.
// self and other promote like a binary op's operands.
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);
// Elementwise max/min of two tensors (broadcasting; nan wins).  On ties the
// gradient is split evenly between the two.
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
