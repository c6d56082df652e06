// Dataset: an indexed collection of examples (size + get), as
// torch.utils.data.Dataset.  get_batch() gathers many at once; datasets that
// can do it faster than one get() per index override it.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace data {

// One example, or a batch of them (leading batch dim).
struct Example {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Example `index` in [0, size()); throws loom::Error otherwise.
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked along a new dim 0.
  virtual Example get_batch(const std::vector<int64_t>& indices) const;
};

// Stacks examples along a new leading dim (the default collate).
Example collate(const std::vector<Example>& examples);

}  // namespace data
}  // namespace loom
