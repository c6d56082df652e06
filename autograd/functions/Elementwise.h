// Differentiable elementwise ops with NumPy broadcasting and type promotion.
// Tensor methods and operators (a + b, a * 2) forward here.  Shape mismatch
// throws naming both shapes; tensors on two devices throw naming both devices.
// Bool tensors throw in arithmetic (mul, maximum and minimum of two bool
// tensors are logical and/or).  In-place forms (Tensor::add_, ...) may narrow
// the result within its category (float64 into float32), not across it.
#pragma once

#include <optional>
#include <string>

#include "tensor/Tensor.h"
#include "tensor/native/UnaryOps.h"

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
// -1, 0 or 1 (0 for nan; the identity on bool); its gradient is zero.
Tensor sign(const Tensor& self);
// e^x - 1 and log(1 + x), exact near 0; the Gauss error function.  Integer
// inputs compute as float32.
Tensor expm1(const Tensor& self);
Tensor log1p(const Tensor& self);
Tensor erf(const Tensor& self);

// ---- activations (torch.nn.functional's; floating inputs only) -----------------
// `inplace` writes the result into self and returns it, as PyTorch's
// inplace=True (throws for a leaf that requires grad, as every in-place op).
// min(max(x, 0), 6).  Integer tensors stay integral.
Tensor relu6(const Tensor& self, bool inplace = false);
// x for x > 0, negative_slope * x otherwise.
Tensor leaky_relu(const Tensor& self, double negative_slope = 0.01, bool inplace = false);
// x for x > 0, alpha * (e^x - 1) otherwise.
Tensor elu(const Tensor& self, double alpha = 1.0, bool inplace = false);
// x * Phi(x) with Phi the standard normal CDF ("none"), or its tanh
// approximation ("tanh"); any other `approximate` throws.
Tensor gelu(const Tensor& self, const std::string& approximate = "none");
// x * sigmoid(x).
Tensor silu(const Tensor& self, bool inplace = false);
// x * relu6(x + 3) / 6 and relu6(x + 3) / 6.
Tensor hardswish(const Tensor& self, bool inplace = false);
Tensor hardsigmoid(const Tensor& self, bool inplace = false);
// log(1 + e^(beta x)) / beta; x itself where beta x > threshold.
Tensor softplus(const Tensor& self, double beta = 1.0, double threshold = 20.0);
// x * tanh(softplus(x)).
Tensor mish(const Tensor& self, bool inplace = false);

// Any op of the unary table (tensor/native/UnaryOps.h) by id, differentiable:
// what the functions above call.  apply_unary_ works in place.
Tensor apply_unary(native::UnaryOp op, const Tensor& self, const optable::UnaryArgs& args = {});
Tensor apply_unary_(native::UnaryOp op, const Tensor& self, const optable::UnaryArgs& args = {});
// Clamps to [min, max]; either bound may be absent, not both (throws).  The
// gradient passes where min <= x <= max.  min > max gives max everywhere.
Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max);
// condition ? self : other, broadcasting all three; condition must be bool.
// self and other promote like a binary op's operands (a Scalar operand does
// not raise the result's dtype).
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);
Tensor where(const Tensor& condition, const Tensor& self, Scalar other);
Tensor where(const Tensor& condition, Scalar self, const Tensor& other);
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
