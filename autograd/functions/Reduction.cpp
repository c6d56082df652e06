// Reductions: forward through native/Reduce, backward rules below.
#include "autograd/functions/Reduction.h"

#include "autograd/functions/Record.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Views.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Re-inserts reduced dims (as size 1) so a reduced gradient broadcasts back.
Tensor unsqueeze_reduced(const Tensor& grad, const IntList& input_sizes,
                         const std::vector<bool>& mask, bool keepdim) {
  if (keepdim) return grad;
  IntList shape;
  for (size_t d = 0; d < input_sizes.size(); ++d) shape.push_back(mask[d] ? 1 : input_sizes[d]);
  return grad.reshape(shape);
}

class SumBackward final : public Node {
 public:
  SumBackward(IntList sizes, std::vector<bool> mask, bool keepdim)
      : sizes_(std::move(sizes)), mask_(std::move(mask)), keepdim_(keepdim) {}
  std::string name() const override { return "SumBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {unsqueeze_reduced(grads[0], sizes_, mask_, keepdim_).expand(sizes_)};
  }

 private:
  IntList sizes_;
  std::vector<bool> mask_;
  bool keepdim_;
};

}  // namespace

Tensor sum(const Tensor& self, IntList dims, bool keepdim) {
  Tensor out = native::sum(self, dims, keepdim);
  if (out.is_floating_point())
    record<SumBackward>({self}, {out}, self.sizes(), dim_mask(dims, self.dim(), "sum"), keepdim);
  return out;
}

Tensor sum_to(const Tensor& grad, const IntList& sizes) {
  if (grad.sizes() == sizes) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  LOOM_CHECK(lead >= 0, "sum_to: cannot sum ", shape_str(grad.sizes()), " to ",
             shape_str(sizes));
  IntList dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (sizes[d - lead] == 1 && grad.sizes()[d] != 1) {
      dims.push_back(d);
    }
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  return r.reshape(sizes);
}

Tensor Tensor::sum() const { return loom::sum(*this); }
Tensor Tensor::sum(IntList dims, bool keepdim) const { return loom::sum(*this, dims, keepdim); }

}  // namespace loom
