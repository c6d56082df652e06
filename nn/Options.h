// Helpers for module options: a size given as one number or one per spatial
// dim (`kernel_size(5)` or `kernel_size({3, 5})`), and the chained-setter
// macro-free pattern options structs follow.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <vector>

#include "tensor/Error.h"

namespace loom {
namespace nn {

// N values, given as one number (repeated) or exactly N numbers.
template <size_t N>
class ExpandingArray {
 public:
  ExpandingArray(int64_t v) : values_(N, v) {}  // NOLINT: implicit by design
  ExpandingArray(std::initializer_list<int64_t> list) : values_(list) {  // NOLINT
    LOOM_CHECK(values_.size() == N, "expected ", N, " values, got ", values_.size());
  }
  ExpandingArray(const std::vector<int64_t>& list) : values_(list) {  // NOLINT
    LOOM_CHECK(values_.size() == N, "expected ", N, " values, got ", values_.size());
  }
  const std::vector<int64_t>& vec() const { return values_; }
  int64_t operator[](size_t i) const { return values_[i]; }

 private:
  std::vector<int64_t> values_;
};

template <size_t N>
std::ostream& operator<<(std::ostream& out, const ExpandingArray<N>& a) {
  out << "[";
  for (size_t i = 0; i < N; ++i) out << (i ? ", " : "") << a[i];
  return out << "]";
}

}  // namespace nn
}  // namespace loom
