#include "autograd/DeferWeightGrad.h"

#include "tensor/native/Join.h"

namespace loom {
namespace autograd {

bool stacks_along_batch(const Tensor& a, const Tensor& b, int64_t min_dim) {
  if (a.dim() != b.dim() || a.dim() < min_dim || a.dtype() != b.dtype() ||
      a.device() != b.device())
    return false;
  for (int64_t d = 1; d < a.dim(); ++d)
    if (a.size(d) != b.size(d)) return false;
  return true;
}

Tensor cat_batches(const std::vector<Tensor>& tensors) { return native::cat(tensors, 0); }

}  // namespace autograd
}  // namespace loom
