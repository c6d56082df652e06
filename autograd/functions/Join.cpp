// Joins (declared in Shape.h): cat and stack through native/Join; backward
// hands each input its slice of the gradient (narrow for cat, select for stack),
// converted back to the input's dtype when cat promoted it.
#include "autograd/functions/Record.h"
#include "autograd/Autocast.h"
#include "autograd/functions/Shape.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Join.h"

namespace loom {

using autograd::Node;
using autograd::record;

namespace {

class CatBackward final : public Node {
 public:
  // sizes[i]: input i's size along dim (-1 for a skipped [0] input).
  CatBackward(int64_t dim, IntList sizes, std::vector<DType> dtypes)
      : dim_(dim), sizes_(std::move(sizes)), dtypes_(std::move(dtypes)) {}
  std::string name() const override { return "CatBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    std::vector<Tensor> out(sizes_.size());
    int64_t offset = 0;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i] < 0) continue;  // skipped input: no gradient
      if (needs_input_grad(i)) out[i] = g.narrow(dim_, offset, sizes_[i]).to(dtypes_[i]);
      offset += sizes_[i];
    }
    return out;
  }

 private:
  int64_t dim_;
  IntList sizes_;
  std::vector<DType> dtypes_;
};

class StackBackward final : public Node {
 public:
  StackBackward(int64_t dim, std::vector<DType> dtypes) : dim_(dim), dtypes_(std::move(dtypes)) {}
  std::string name() const override { return "StackBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(dtypes_.size());
    for (size_t i = 0; i < dtypes_.size(); ++i)
      if (needs_input_grad(i)) out[i] = grads[0].select(dim_, static_cast<int64_t>(i)).to(dtypes_[i]);
    return out;
  }

 private:
  int64_t dim_;
  std::vector<DType> dtypes_;
};

std::vector<DType> dtypes_of(const std::vector<Tensor>& tensors) {
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors) dtypes.push_back(t.dtype());
  return dtypes;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("cat", tensors);
    amp::detail::SuspendAutocast suspend;
    return cat(in, dim);
  }
  Tensor out = native::cat(tensors, dim);
  if (!out.is_floating_point() || !autograd::any_requires_grad(tensors)) return out;
  int64_t rank = -1;
  IntList sizes;
  for (const Tensor& t : tensors) {
    const bool skipped = native::cat_skips(t);
    if (!skipped && rank < 0) rank = t.dim();
    sizes.push_back(skipped ? -1 : 0);
  }
  if (rank < 0) return out;  // every input was skipped: nothing flows back
  dim = wrap_dim(dim, rank, "cat");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i] == 0) sizes[i] = tensors[i].sizes()[dim];
  record<CatBackward>(tensors, {out}, dim, sizes, dtypes_of(tensors));
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("stack", tensors);
    amp::detail::SuspendAutocast suspend;
    return stack(in, dim);
  }
  Tensor out = native::stack(tensors, dim);
  if (out.is_floating_point() && autograd::any_requires_grad(tensors)) {
    dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
    record<StackBackward>(tensors, {out}, dim, dtypes_of(tensors));
  }
  return out;
}

}  // namespace loom
