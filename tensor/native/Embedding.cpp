// Raw embedding/one_hot: index checks and shapes; row copies in tensor/cpu/Embedding.cpp.
#include "tensor/native/Embedding.h"

#include <algorithm>
#include <limits>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Index.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

namespace {

// Contiguous int64 indices, every value in [0, limit) (limit < 0: only >= 0).
Tensor checked_indices(const char* op, const Tensor& indices, int64_t limit) {
  check_defined(op, indices, "indices");
  LOOM_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op,
             ": expected indices of dtype int64 (or int32), got ", indices.describe());
  check_kernel_device(op, indices);
  const Tensor idx = contiguous(to(indices, indices.device(), kInt64));
  if (idx.is_cuda()) {
    // One device-side scan, its verdict deferred (no wait for the device).
    const std::string name = op;
    const auto message = [name, limit](int64_t bad) {
      if (limit < 0) return detail::str(name, ": class values must be non-negative, got ", bad);
      return detail::str(name, ": index ", bad, " is out of range for a table of V = ", limit,
                         " rows (expected [0, ", limit, "))");
    };
    cuda::check_index_values(idx, limit < 0 ? std::numeric_limits<int64_t>::max() : limit, false,
                             0, message);
    return idx;
  }
  const int64_t* p = static_cast<const int64_t*>(idx.data_ptr());
  for (int64_t i = 0; i < idx.numel(); ++i) {
    if (limit < 0) {
      LOOM_CHECK(p[i] >= 0, op, ": class values must be non-negative, got ", p[i]);
    } else {
      LOOM_CHECK(p[i] >= 0 && p[i] < limit, op, ": index ", p[i],
                 " is out of range for a table of V = ", limit, " rows (expected [0, ", limit,
                 "))");
    }
  }
  return idx;
}

IntList with_last(const IntList& sizes, int64_t last) {
  IntList out = sizes;
  out.push_back(last);
  return out;
}

// one_hot on a CUDA device: idx (contiguous int64, all >= 0) scattered as
// ones into zeros.  Inferring num_classes reads the max back (a wait for the
// device, as in PyTorch's one_hot); the range check is deferred.
Tensor one_hot_cuda(const Tensor& indices, const Tensor& idx, int64_t num_classes) {
  const int64_t n = idx.numel();
  if (num_classes == -1) {
    LOOM_CHECK(n > 0, "one_hot: cannot infer the number of classes from an empty tensor ",
               indices.describe(), "; pass num_classes");
    num_classes = *to(native::max(idx), Device(kCPU), kInt64).data_ptr<int64_t>() + 1;
  }
  cuda::check_index_values(idx, num_classes, false, 0, [num_classes](int64_t bad) {
    return detail::str("one_hot: class value ", bad, " must be smaller than num_classes (",
                       num_classes, ")");
  });
  const TensorOptions int64_on = TensorOptions(kInt64).device(indices.device());
  Tensor out = zeros({n, num_classes}, int64_on);
  if (n > 0 && num_classes > 0)
    cuda::scatter_add_kernel(out, 1, reshape(idx, {n, 1}), ones({n, 1}, int64_on));
  return reshape(out, with_last(indices.sizes(), num_classes));
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_defined("embedding", weight, "weight");
  LOOM_CHECK(weight.dim() == 2, "embedding: expected weight of shape (V, D), got ",
             weight.describe());
  check_same_device("embedding", weight, "weight", indices, "indices");
  check_kernel_device("embedding", weight);
  const int64_t V = weight.sizes()[0], D = weight.sizes()[1];
  const Tensor idx = checked_indices("embedding", indices, V);
  Tensor out = empty(with_last(indices.sizes(), D),
                     TensorOptions(weight.dtype()).device(weight.device()));
  if (weight.is_cuda()) cuda::embedding_kernel(out, contiguous(weight), idx);
  else cpu::embedding_kernel(out, contiguous(weight), idx);
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights) {
  check_defined("embedding_backward", grad, "grad");
  LOOM_CHECK(grad.dim() >= 1 && grad.dim() == indices.dim() + 1 &&
                 IntList(grad.sizes().begin(), grad.sizes().end() - 1) == indices.sizes(),
             "embedding_backward: grad ", grad.describe(), " does not match indices ",
             indices.describe());
  const Tensor idx = checked_indices("embedding_backward", indices, num_weights);
  const int64_t D = grad.sizes().back();
  check_same_device("embedding_backward", grad, "grad", indices, "indices");
  Tensor grad_weight = zeros({num_weights, D}, TensorOptions(grad.dtype()).device(grad.device()));
  if (grad.is_cuda()) cuda::embedding_backward_kernel(grad_weight, contiguous(grad), idx);
  else cpu::embedding_backward_kernel(grad_weight, contiguous(grad), idx);
  return grad_weight;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_defined("one_hot", indices, "indices");
  LOOM_CHECK(indices.dtype() == kInt64, "one_hot: expected indices of dtype int64, got ",
             indices.describe());
  LOOM_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 or non-negative, got ",
             num_classes);
  const Tensor idx = checked_indices("one_hot", indices, -1);
  if (idx.is_cuda()) return one_hot_cuda(indices, idx, num_classes);
  const int64_t* p = static_cast<const int64_t*>(idx.data_ptr());
  const int64_t n = idx.numel();
  if (num_classes == -1) {
    LOOM_CHECK(n > 0, "one_hot: cannot infer the number of classes from an empty tensor ",
               indices.describe(), "; pass num_classes");
    num_classes = *std::max_element(p, p + n) + 1;
  }
  for (int64_t i = 0; i < n; ++i)
    LOOM_CHECK(p[i] < num_classes, "one_hot: class value ", p[i],
               " must be smaller than num_classes (", num_classes, ")");
  Tensor out = zeros(with_last(indices.sizes(), num_classes),
                     TensorOptions(kInt64).device(indices.device()));
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  for (int64_t i = 0; i < n; ++i) o[i * num_classes + p[i]] = 1;
  return out;
}

}  // namespace native
}  // namespace loom
