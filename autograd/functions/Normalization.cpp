// batch_norm: forward through native::batch_norm (which also updates the
// running statistics), backward through the fused kernel of
// native::batch_norm_backward using the statistics the forward used.
#include "autograd/functions/Normalization.h"

#include "autograd/GradMode.h"
#include "autograd/functions/Record.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Normalization.h"
#include "tensor/native/Unary.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// Inputs (input, weight, bias, and residual for batch_norm_add_relu).  With
// relu the gradient first goes through the ReLU's mask, taken from the saved
// output (inside batch norm's backward passes where the device fuses it);
// with a residual the masked gradient is also the residual's.
class BatchNormBackward final : public Node {
 public:
  BatchNormBackward(bool training, bool relu, bool residual)
      : training_(training), relu_(relu), residual_(residual) {}
  std::string name() const override {
    return residual_ ? "BatchNormAddReluBackward"
                     : relu_ ? "BatchNormReluBackward" : "BatchNormBackward";
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0], y = relu_ ? output.unpack(*this) : Tensor();
    Tensor g_residual;
    if (residual_) {
      // The residual needs the masked gradient itself, so it is made once.
      g = native::unary_backward(native::unary_op<optable::Relu>(), g, y, {});
      y = Tensor();
      if (needs_input_grad(3)) g_residual = native::to(g, g.device(), residual_dtype);
    }
    Tensor gi, gw, gb;
    native::batch_norm_backward(g, input.unpack(*this),
                                weight.defined() ? weight.unpack(*this) : Tensor(), save_mean,
                                save_invstd, training_, needs_input_grad(0), needs_input_grad(1),
                                needs_input_grad(2), gi, gw, gb, y);
    if (residual_) return {gi, gw, gb, g_residual};
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
  DType residual_dtype = kFloat32;    // with a residual

 private:
  bool training_, relu_, residual_;
};

// The forward of batch_norm, batch_norm_relu and batch_norm_add_relu, and
// their node.
Tensor batch_norm_recorded(const Tensor& input, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                           bool training, double momentum, double eps, bool relu,
                           const Tensor& residual = Tensor()) {
  Tensor out, save_mean, save_invstd;
  {
    // The running-statistics update is not part of the graph.
    NoGradGuard no_grad;
    std::tie(out, save_mean, save_invstd) = native::batch_norm(
        input, running_mean, running_var, weight, bias, training, momentum, eps, relu, residual);
  }
  std::vector<Tensor> inputs{input, weight, bias};
  if (residual.defined()) inputs.push_back(residual);
  if (auto node = record<BatchNormBackward>(inputs, {out}, training, relu, residual.defined())) {
    node->input = SavedTensor(input, false);
    if (weight.defined()) node->weight = SavedTensor(weight, false);
    if (relu) node->output = SavedTensor(out, true);
    if (residual.defined()) node->residual_dtype = residual.dtype();
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

Tensor batch_norm_add_relu(const Tensor& input, const Tensor& residual,
                           const Tensor& running_mean, const Tensor& running_var,
                           const Tensor& weight, const Tensor& bias, bool training,
                           double momentum, double eps) {
  LOOM_CHECK(residual.defined(), "batch_norm_add_relu: the residual is undefined");
  return batch_norm_recorded(input, running_mean, running_var, weight, bias, training, momentum,
                             eps, true, residual);
}

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return batch_norm_recorded(input, running_mean, running_var, weight, bias, training, momentum,
                             eps, false);
}

}  // namespace loom
