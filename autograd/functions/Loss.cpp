// Losses, dropout, one_hot and embedding: forward through native/Loss,
// native/Dropout and native/Embedding, backward rules below.  cross_entropy
// is one fused node (log_softmax + nll + smoothing) that saves only the input
// and a logsumexp per sample.  Class weights and targets get no gradient.
#include "autograd/functions/Loss.h"
#include "autograd/Autocast.h"

#include "autograd/functions/Elementwise.h"
#include "autograd/functions/Record.h"
#include "autograd/functions/Reduction.h"
#include "tensor/native/Dropout.h"
#include "tensor/native/Embedding.h"
#include "tensor/native/Loss.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;
using native::LossReduction;

namespace {

LossReduction to_native(Reduction r) {
  switch (r) {
    case Reduction::kNone: return LossReduction::kNone;
    case Reduction::kMean: return LossReduction::kMean;
    case Reduction::kSum: return LossReduction::kSum;
  }
  LOOM_FAIL("loss: unknown reduction ", static_cast<int>(r));
}

// Saved state shared by the class-index losses.
struct ClassLossSaved {
  SavedTensor input, target, weight;
  // The mean's divisor, kept where the forward computed it (reading a GPU's
  // value on the host would wait for the device).
  SavedTensor total_weight;
  LossReduction reduction = LossReduction::kMean;
  int64_t ignore_index = -100;
  void reset() {
    input.reset();
    target.reset();
    weight.reset();
    total_weight.reset();
  }
};

class NllLossBackward final : public Node {
 public:
  std::string name() const override { return "NllLossBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::nll_loss_backward(grads[0], s.input.unpack(*this), s.target.unpack(*this),
                                      s.weight.unpack(*this), s.reduction, s.ignore_index,
                                      s.total_weight.unpack(*this))};
  }
  void release_saved() override { s.reset(); }
  ClassLossSaved s;
};

class CrossEntropyBackward final : public Node {
 public:
  std::string name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::cross_entropy_backward(
        grads[0], s.input.unpack(*this), s.target.unpack(*this), s.weight.unpack(*this),
        logsumexp.unpack(*this), s.reduction, s.ignore_index, label_smoothing,
        s.total_weight.unpack(*this))};
  }
  void release_saved() override {
    s.reset();
    logsumexp.reset();
  }
  ClassLossSaved s;
  SavedTensor logsumexp;
  double label_smoothing = 0;
};

// d/dx = 2 (x - y) g (/ n for the mean); d/dy is its negation; both summed
// back over broadcast dims.
class MseLossBackward final : public Node {
 public:
  explicit MseLossBackward(LossReduction reduction) : reduction_(reduction) {}
  std::string name() const override { return "MseLossBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = input.unpack(*this), y = target.unpack(*this);
    const Tensor g = native::mse_loss_backward(grads[0], x, y, reduction_);
    Tensor gx, gy;
    if (needs_input_grad(0)) gx = sum_to(g, x.sizes());
    if (needs_input_grad(1)) gy = sum_to(-g, y.sizes());
    return {gx, gy};
  }
  void release_saved() override {
    input.reset();
    target.reset();
  }
  SavedTensor input, target;

 private:
  LossReduction reduction_;
};

class DropoutBackward final : public Node {
 public:
  std::string name() const override { return "DropoutBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0] * mask.unpack(*this)};
  }
  void release_saved() override { mask.reset(); }
  SavedTensor mask;
};

class EmbeddingBackward final : public Node {
 public:
  explicit EmbeddingBackward(int64_t num_weights) : num_weights_(num_weights) {}
  std::string name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::embedding_backward(grads[0], indices.unpack(*this), num_weights_)};
  }
  void release_saved() override { indices.reset(); }
  SavedTensor indices;

 private:
  int64_t num_weights_;
};

void save_class_loss(ClassLossSaved& s, const Tensor& input, const Tensor& target,
                     const Tensor& weight, LossReduction reduction, int64_t ignore_index,
                     const Tensor& total_weight) {
  s.input = SavedTensor(input, false);
  s.target = SavedTensor(target, false);
  if (weight.defined()) s.weight = SavedTensor(weight, false);
  s.reduction = reduction;
  s.ignore_index = ignore_index;
  s.total_weight = SavedTensor(total_weight, false);
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                int64_t ignore_index, const Tensor& weight) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("nll_loss", {input, weight});
    amp::detail::SuspendAutocast suspend;
    return nll_loss(in[0], target, reduction, ignore_index, in[1]);
  }
  const LossReduction r = to_native(reduction);
  auto [loss, total_weight] = native::nll_loss(input, target, weight, r, ignore_index);
  if (auto node = record<NllLossBackward>({input}, {loss}))
    save_class_loss(node->s, input, target, weight, r, ignore_index, total_weight);
  return loss;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                     int64_t ignore_index, double label_smoothing, const Tensor& weight) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("cross_entropy", {input, weight});
    amp::detail::SuspendAutocast suspend;
    return cross_entropy(in[0], target, reduction, ignore_index, label_smoothing, in[1]);
  }
  const LossReduction r = to_native(reduction);
  auto [loss, logsumexp, total_weight] =
      native::cross_entropy(input, target, weight, r, ignore_index, label_smoothing);
  if (auto node = record<CrossEntropyBackward>({input}, {loss})) {
    save_class_loss(node->s, input, target, weight, r, ignore_index, total_weight);
    node->logsumexp = SavedTensor(logsumexp, false);
    node->label_smoothing = label_smoothing;
  }
  return loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("mse_loss", {input, target});
    amp::detail::SuspendAutocast suspend;
    return mse_loss(in[0], in[1], reduction);
  }
  const LossReduction r = to_native(reduction);
  Tensor loss = native::mse_loss(input, target, r);
  if (auto node = record<MseLossBackward>({input, target}, {loss}, r)) {
    node->input = SavedTensor(input, false);
    node->target = SavedTensor(target, false);
  }
  return loss;
}

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  LOOM_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return input;
  auto [out, mask] = native::dropout(input, p, gen);
  if (auto node = record<DropoutBackward>({input}, {out})) node->mask = SavedTensor(mask, false);
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  return native::one_hot(indices, num_classes);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  Tensor out = native::embedding(weight, indices);
  if (out.is_floating_point())
    if (auto node = record<EmbeddingBackward>({weight}, {out}, weight.sizes()[0]))
      node->indices = SavedTensor(indices, false);
  return out;
}

}  // namespace loom
