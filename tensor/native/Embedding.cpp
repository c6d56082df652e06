// Raw embedding/one_hot: index checks and shapes; row copies in tensor/cpu/Embedding.cpp.
#include "tensor/native/Embedding.h"

#include <algorithm>
#include <limits>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Binary.h"
#include "tensor/native/BinaryOps.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Index.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Views.h"

namespace loom {
namespace native {

DispatchStub<EmbeddingKernel> embedding_stub("embedding");
DispatchStub<EmbeddingBackwardKernel> embedding_backward_stub("embedding_backward");

namespace {

// Contiguous int64 indices, every value in [0, limit) (limit < 0: only >= 0).
Tensor checked_indices(const char* op, const Tensor& indices, int64_t limit) {
  check_defined(op, indices, "indices");
  LOOM_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op,
             ": expected indices of dtype int64 (or int32), got ", indices.describe());
  check_kernel_device(op, indices);
  const Tensor idx = contiguous(to(indices, indices.device(), kInt64));
  const std::string name = op;
  check_index_values(idx, limit < 0 ? std::numeric_limits<int64_t>::max() : limit, false, 0,
                     [name, limit](int64_t bad) {
                       if (limit < 0)
                         return detail::str(name, ": class values must be non-negative, got ",
                                            bad);
                       return detail::str(name, ": index ", bad,
                                          " is out of range for a table of V = ", limit,
                                          " rows (expected [0, ", limit, "))");
                     });
  return idx;
}

IntList with_last(const IntList& sizes, int64_t last) {
  IntList out = sizes;
  out.push_back(last);
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (weight.defined() && is_reduced_float(weight.dtype()))
    return round_to(embedding(widen(weight), indices), weight.dtype());
  check_defined("embedding", weight, "weight");
  LOOM_CHECK(weight.dim() == 2, "embedding: expected weight of shape (V, D), got ",
             weight.describe());
  check_same_device("embedding", weight, "weight", indices, "indices");
  check_kernel_device("embedding", weight);
  const int64_t V = weight.sizes()[0], D = weight.sizes()[1];
  const Tensor idx = checked_indices("embedding", indices, V);
  Tensor out = empty(with_last(indices.sizes(), D),
                     TensorOptions(weight.dtype()).device(weight.device()));
  embedding_stub(weight.device(), out, contiguous(weight), idx);
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (grad.defined() && is_reduced_float(grad.dtype()))
    return round_to(embedding_backward(widen(grad), indices, num_weights), grad.dtype());
  check_defined("embedding_backward", grad, "grad");
  LOOM_CHECK(grad.dim() >= 1 && grad.dim() == indices.dim() + 1 &&
                 IntList(grad.sizes().begin(), grad.sizes().end() - 1) == indices.sizes(),
             "embedding_backward: grad ", grad.describe(), " does not match indices ",
             indices.describe());
  const Tensor idx = checked_indices("embedding_backward", indices, num_weights);
  const int64_t D = grad.sizes().back();
  check_same_device("embedding_backward", grad, "grad", indices, "indices");
  Tensor grad_weight = zeros({num_weights, D}, TensorOptions(grad.dtype()).device(grad.device()));
  embedding_backward_stub(grad.device(), grad_weight, contiguous(grad), idx);
  return grad_weight;
}

// One check of the values per call (on a GPU it is deferred: its error
// surfaces at the next point where the host waits, see DeferredChecks.h), and
// the output is a comparison with the classes rather than a scatter, whose
// own index check would report the same bad value a second time later.
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_defined("one_hot", indices, "indices");
  LOOM_CHECK(indices.dtype() == kInt64, "one_hot: expected indices of dtype int64, got ",
             indices.describe());
  LOOM_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 or non-negative, got ",
             num_classes);
  Tensor idx;
  if (num_classes == -1) {
    idx = checked_indices("one_hot", indices, -1);
    // Reads the largest class back (on a CUDA device a wait, as in PyTorch),
    // which also reports a negative value.
    LOOM_CHECK(idx.numel() > 0, "one_hot: cannot infer the number of classes from an empty tensor ",
               indices.describe(), "; pass num_classes");
    num_classes = to(native::max(idx), Device(kCPU), kInt64).data_ptr<int64_t>()[0] + 1;
  } else {
    check_kernel_device("one_hot", indices);
    idx = contiguous(indices);
    check_index_values(idx, num_classes, false, 0, [num_classes](int64_t bad) {
      if (bad < 0) return detail::str("one_hot: class values must be non-negative, got ", bad);
      return detail::str("one_hot: class value ", bad, " must be smaller than num_classes (",
                         num_classes, ")");
    });
  }
  const int64_t n = idx.numel();
  const TensorOptions int64_on = TensorOptions(kInt64).device(indices.device());
  const Tensor classes = arange(num_classes, int64_on);
  const Tensor hot = binary(binary_op<optable::Eq>(), reshape(idx, {n, 1}), classes);
  return reshape(to(hot, indices.device(), kInt64), with_last(indices.sizes(), num_classes));
}

}  // namespace native
}  // namespace loom
