// Tensor factories.  Random ones draw from `gen`, else the default generator
// (seed it with manual_seed).  All throw loom::Error on negative sizes.
#pragma once

#include <cstring>
#include <functional>
#include <vector>

#include "tensor/Generator.h"
#include "tensor/ShapeUtil.h"
#include "tensor/Tensor.h"
#include "tensor/TensorOptions.h"

namespace loom {

// Uninitialised memory of the given shape.
Tensor empty(IntList sizes, TensorOptions options = {});
// Uninitialised and laid out in `format` (channels last: 4-D sizes only).
Tensor empty(IntList sizes, TensorOptions options, MemoryFormat format);
Tensor zeros(IntList sizes, TensorOptions options = {});
Tensor ones(IntList sizes, TensorOptions options = {});
Tensor full(IntList sizes, Scalar value, TensorOptions options = {});
// A 0-dimensional tensor holding `value`.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});
// [start, end) in steps of `step`; int64 unless options say otherwise.
Tensor arange(Scalar end, TensorOptions options = kInt64);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = kInt64);
// `steps` values evenly spaced from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
// Uniform [0, 1).
Tensor rand(IntList sizes, TensorOptions options = {}, Generator* gen = nullptr);
// Standard normal.
Tensor randn(IntList sizes, TensorOptions options = {}, Generator* gen = nullptr);
// Uniform integers in [low, high); int64 unless options say otherwise.
Tensor randint(int64_t low, int64_t high, IntList sizes, TensorOptions options = kInt64,
               Generator* gen = nullptr);
// A random permutation of 0..n-1 (int64).
Tensor randperm(int64_t n, TensorOptions options = kInt64, Generator* gen = nullptr);

// Same shape (and dtype/device unless given) as `like`.
Tensor empty_like(const Tensor& like);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, Scalar value);
Tensor rand_like(const Tensor& like, Generator* gen = nullptr);
Tensor randn_like(const Tensor& like, Generator* gen = nullptr);

// Wraps caller-owned memory without copying; `deleter` (optional) runs when
// the last view goes away.  The data must outlive the tensor otherwise.
Tensor from_blob(void* data, IntList sizes, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});
Tensor from_blob(void* data, IntList sizes, IntList strides, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});

// A tensor copying `values`, with shape `sizes` (default: 1-D).  Throws when
// the element count does not match the shape.
template <typename T>
Tensor tensor(const std::vector<T>& values, IntList sizes = {}, TensorOptions options = dtype_of<T>());
template <typename T>
Tensor tensor(std::initializer_list<T> values, IntList sizes = {}) {
  return tensor(std::vector<T>(values), std::move(sizes), dtype_of<T>());
}

// ---- template definitions -----------------------------------------------------

Tensor tensor_from_bytes(const void* bytes, DType src_dtype, IntList sizes, TensorOptions options);

template <typename T>
Tensor tensor(const std::vector<T>& values, IntList sizes, TensorOptions options) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  LOOM_CHECK(n == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
             " values cannot fill a tensor of shape ", shape_str(sizes), " (", n, " elements)");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return tensor_from_bytes(bytes.data(), kBool, sizes, options);
  } else {
    return tensor_from_bytes(values.data(), dtype_of<T>(), sizes, options);
  }
}

}  // namespace loom
