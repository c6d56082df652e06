// In-place fills (fill_, zero_, uniform_, normal_): Tensor methods over
// native/Fill.  nn init runs them under NoGradGuard.  With grad mode on, a
// leaf that requires grad throws (as in PyTorch), and a non-leaf that
// requires grad gets a FillBackward grad_fn: its new values are constants,
// so no gradient flows to its old history.
#include "autograd/GradMode.h"
#include "autograd/Node.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Fill.h"

namespace loom {
namespace {

class FillBackward final : public autograd::Node {
 public:
  std::string name() const override { return "FillBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
};

template <typename Write>
Tensor& fill_impl(Tensor& self, const char* op, Write&& write) {
  native::check_defined(op, self, "self");
  const bool recording = autograd::any_requires_grad({&self});
  if (recording) autograd::check_inplace(self, op);
  write();
  if (recording) autograd::set_history(std::make_shared<FillBackward>(), {self}, {self});
  return self;
}

}  // namespace

Tensor& Tensor::fill_(Scalar value) {
  return fill_impl(*this, "fill_", [&] { native::fill_(*this, value); });
}

Tensor& Tensor::zero_() {
  return fill_impl(*this, "zero_", [&] { native::zero_(*this); });
}

Tensor& Tensor::uniform_(double low, double high) {
  return fill_impl(*this, "uniform_",
                   [&] { native::uniform_(*this, low, high, default_generator()); });
}

Tensor& Tensor::normal_(double mean, double std) {
  return fill_impl(*this, "normal_",
                   [&] { native::normal_(*this, mean, std, default_generator()); });
}

}  // namespace loom
