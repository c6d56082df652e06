// batch_norm: forward through native::batch_norm (which also updates the
// running statistics), backward through the fused kernel of
// native::batch_norm_backward using the statistics the forward used.
#include "autograd/functions/Normalization.h"

#include "autograd/GradMode.h"
#include "autograd/functions/Record.h"
#include "tensor/native/Normalization.h"
#include "tensor/native/Unary.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Inputs (input, weight, bias).
class BatchNormBackward final : public Node {
 public:
  explicit BatchNormBackward(bool training) : training_(training) {}
  std::string name() const override { return "BatchNormBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor gi, gw, gb;
    native::batch_norm_backward(grads[0], input.unpack(*this),
                                weight.defined() ? weight.unpack(*this) : Tensor(), save_mean,
                                save_invstd, training_, needs_input_grad(0), needs_input_grad(1),
                                needs_input_grad(2), gi, gw, gb);
    return {gi, gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
    save_mean = Tensor();
    save_invstd = Tensor();
  }
  SavedTensor input, weight;
  Tensor save_mean, save_invstd;  // owned by this node only

 private:
  bool training_;
};

// batch_norm_relu's: the ReLU's mask from the output, then batch norm's
// backward.  Inputs (input, weight, bias).
class BatchNormReluBackward final : public Node {
 public:
  explicit BatchNormReluBackward(bool training) : training_(training) {}
  std::string name() const override { return "BatchNormReluBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = native::unary_backward(native::unary_op<optable::Relu>(), grads[0],
                                            output.unpack(*this), {});
    Tensor gi, gw, gb;
    native::batch_norm_backward(g, input.unpack(*this),
                                weight.defined() ? weight.unpack(*this) : Tensor(), save_mean,
                                save_invstd, training_, needs_input_grad(0), needs_input_grad(1),
                                needs_input_grad(2), gi, gw, gb);
    return {gi, gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
    output.reset();
    save_mean = Tensor();
    save_invstd = Tensor();
  }
  SavedTensor input, weight, output;
  Tensor save_mean, save_invstd;  // owned by this node only

 private:
  bool training_;
};

}  // namespace

Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps) {
  Tensor out, save_mean, save_invstd;
  {
    NoGradGuard no_grad;
    std::tie(out, save_mean, save_invstd) = native::batch_norm(
        input, running_mean, running_var, weight, bias, training, momentum, eps, true);
  }
  if (auto node = record<BatchNormReluBackward>({input, weight, bias}, {out}, training)) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    node->output = SavedTensor(out, true);
    node->save_mean = save_mean;
    node->save_invstd = save_invstd;
  }
  return out;
}

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  Tensor out, save_mean, save_invstd;
  {
    // The running-statistics update is not part of the graph.
    NoGradGuard no_grad;
    std::tie(out, save_mean, save_invstd) = native::batch_norm(
        input, running_mean, running_var, weight, bias, training, momentum, eps);
  }
  if (auto node = record<BatchNormBackward>({input, weight, bias}, {out}, training)) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    node->save_mean = save_mean;
    node->save_invstd = save_invstd;
  }
  return out;
}

}  // namespace loom
