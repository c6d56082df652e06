// Raw in-place fills: zeros and random values (a constant fill_ is in
// Copy.h).  Each writes every element of t, whatever its layout (a view
// writes through to its base), and bumps t's version.
#pragma once

#include "tensor/Generator.h"
#include "tensor/Tensor.h"

namespace loom {
namespace native {

void zero_(const Tensor& t);
// Uniform in [low, high), drawn from gen (under its mutex) in row-major
// order.  Throws unless t is floating and low <= high (both finite).
void uniform_(const Tensor& t, double low, double high, Generator& gen);
// Normal with the given mean and standard deviation (std >= 0).
void normal_(const Tensor& t, double mean, double std, Generator& gen);

}  // namespace native
}  // namespace loom
