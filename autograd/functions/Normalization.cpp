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

// Inputs (input, weight, bias).  With relu (batch_norm_relu's node) the
// gradient first goes through the ReLU's mask, taken from the saved output.
class BatchNormBackward final : public Node {
 public:
  BatchNormBackward(bool training, bool relu) : training_(training), relu_(relu) {}
  std::string name() const override {
    return relu_ ? "BatchNormReluBackward" : "BatchNormBackward";
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = relu_ ? native::unary_backward(native::unary_op<optable::Relu>(), grads[0],
                                                    output.unpack(*this), {})
                           : grads[0];
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
  SavedTensor input, weight, output;  // output: with relu only
  Tensor save_mean, save_invstd;      // owned by this node only

 private:
  bool training_, relu_;
};

// The forward of batch_norm and batch_norm_relu, and their node.
Tensor batch_norm_recorded(const Tensor& input, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                           bool training, double momentum, double eps, bool relu) {
  Tensor out, save_mean, save_invstd;
  {
    // The running-statistics update is not part of the graph.
    NoGradGuard no_grad;
    std::tie(out, save_mean, save_invstd) = native::batch_norm(
        input, running_mean, running_var, weight, bias, training, momentum, eps, relu);
  }
  if (auto node = record<BatchNormBackward>({input, weight, bias}, {out}, training, relu)) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    if (relu) node->output = SavedTensor(out, true);
    node->save_mean = save_mean;
    node->save_invstd = save_invstd;
  }
  return out;
}

}  // namespace

Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps) {
  return batch_norm_recorded(input, running_mean, running_var, weight, bias, training, momentum,
                             eps, true);
}

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return batch_norm_recorded(input, running_mean, running_var, weight, bias, training, momentum,
                             eps, false);
}

}  // namespace loom
