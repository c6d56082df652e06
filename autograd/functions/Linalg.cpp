// Matrix products: forward through native/Linalg, backward rules below.
// matmul is composed from mm/bmm and shape ops (as in PyTorch), so its
// gradient comes from theirs; batch dims broadcast through expand, whose
// backward sums them back.
#include "autograd/functions/Linalg.h"
#include "autograd/Autocast.h"

#include "autograd/DeferWeightGrad.h"
#include "autograd/functions/Record.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Linalg.h"
#include "tensor/native/Views.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

// d(a @ b): grad @ b^T to a, a^T @ grad to b.
class MmBackward final : public Node {
 public:
  std::string name() const override { return "MmBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = native::mm(g, native::transpose(b.unpack(*this), 0, 1));
    if (needs_input_grad(1)) gb = native::mm(native::transpose(a.unpack(*this), 0, 1), g);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
};

class BmmBackward final : public Node {
 public:
  std::string name() const override { return "BmmBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = native::bmm(g, native::transpose(b.unpack(*this), 1, 2));
    if (needs_input_grad(1)) gb = native::bmm(native::transpose(a.unpack(*this), 1, 2), g);
    return {ga, gb};
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
};

// Inputs (input, weight, bias).
// Inputs (input, weight, bias); the deferred twin of a split backward
// (autograd/DeferWeightGrad.h) computes the weight and bias gradients.
class LinearBackward final : public Node {
 public:
  std::string name() const override {
    return is_deferred() ? "LinearWeightBackward" : "LinearBackward";
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor gi, gw, gb;
    native::linear_backward(grads[0], input.unpack(*this), weight.unpack(*this),
                            needs_input_grad(0), needs_input_grad(1), needs_input_grad(2), gi, gw,
                            gb);
    return autograd::pass_through(*this, {gi, gw, gb}, grads[0]);
  }
  // Twins of one layer: their weight gradients are one product over the
  // rows of all of them.
  bool coalesces_with(const Node& other) const override {
    const auto* o = dynamic_cast<const LinearBackward*>(&other);
    if (o == nullptr || !is_deferred() || !o->is_deferred()) return false;
    // (A 1-D input has no batch dim to stack along.)
    return autograd::stacks_along_batch(input.unpack(*this), o->input.unpack(*o), 2);
  }
  std::vector<Tensor> apply_coalesced(const std::vector<Node*>& group,
                                      std::vector<std::vector<Tensor>>&& grads) override {
    const auto [x, go] = autograd::stacked_inputs_and_grads<LinearBackward>(group, grads);
    Tensor gi, gw, gb;
    native::linear_backward(go, x, weight.unpack(*this), false, needs_input_grad(1),
                            needs_input_grad(2), gi, gw, gb);
    return {Tensor(), gw, gb};
  }
  void release_saved() override {
    input.reset();
    weight.reset();
  }
  SavedTensor input, weight;
};

std::string dims_str(const Tensor& t) {
  std::string s;
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? "x" : "") + std::to_string(t.sizes()[d]);
  return s;
}

IntList concat(IntList a, const IntList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

Tensor mm(const Tensor& self, const Tensor& other) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("mm", {self, other});
    amp::detail::SuspendAutocast suspend;
    return mm(in[0], in[1]);
  }
  Tensor out = native::mm(self, other);
  if (out.is_floating_point())
    if (auto node = record<MmBackward>({self, other}, {out})) {
      node->a = SavedTensor(self, false);
      node->b = SavedTensor(other, false);
    }
  return out;
}

Tensor bmm(const Tensor& self, const Tensor& other) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("bmm", {self, other});
    amp::detail::SuspendAutocast suspend;
    return bmm(in[0], in[1]);
  }
  Tensor out = native::bmm(self, other);
  if (out.is_floating_point())
    if (auto node = record<BmmBackward>({self, other}, {out})) {
      node->a = SavedTensor(self, false);
      node->b = SavedTensor(other, false);
    }
  return out;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("linear", {input, weight, bias});
    amp::detail::SuspendAutocast suspend;
    return linear(in[0], in[1], in[2]);
  }
  Tensor out = native::linear(input, weight, bias);
  if (out.is_floating_point())
    if (auto node = record<LinearBackward>({input, weight, bias}, {out})) {
      node->input = SavedTensor(input, false);
      node->weight = SavedTensor(weight, false);
      if (autograd::DeferWeightGrad::is_enabled()) {
        auto twin = std::make_shared<LinearBackward>();
        twin->input = node->input;
        twin->weight = node->weight;
        autograd::split_off_deferred(*node, twin, 1);
      }
    }
  return out;
}

Tensor matmul(const Tensor& self, const Tensor& other) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("matmul", {self, other});
    amp::detail::SuspendAutocast suspend;
    return matmul(in[0], in[1]);
  }
  native::check_defined("matmul", self, "self");
  native::check_defined("matmul", other, "other");
  const int64_t da = self.dim(), db = other.dim();
  LOOM_CHECK(da >= 1 && db >= 1, "matmul: both arguments need at least 1 dimension, got ",
             self.describe(), " and ", other.describe());
  const int64_t k = self.size(-1);
  const int64_t kb = db == 1 ? other.size(0) : other.size(-2);
  LOOM_CHECK(k == kb, "matmul: shapes cannot be multiplied (", dims_str(self), " and ",
             dims_str(other), "): ", k, " != ", kb);
  if (da == 1 && db == 1) return mm(self.reshape({1, k}), other.reshape({k, 1})).reshape({});
  if (da == 2 && db == 1) return mm(self, other.reshape({k, 1})).reshape({self.size(0)});
  if (da == 1 && db == 2) return mm(self.reshape({1, k}), other).reshape({other.size(1)});
  if (da == 2 && db == 2) return mm(self, other);
  if (da >= 3 && db <= 2) {
    // Fold the batch dims of self into rows: one large GEMM.
    IntList lead(self.sizes().begin(), self.sizes().end() - 1);
    const Tensor rows = self.reshape({numel_of(lead), k});  // not -1: k may be 0
    if (db == 1) return mm(rows, other.reshape({k, 1})).reshape(lead);
    return mm(rows, other).reshape(concat(lead, {other.size(1)}));
  }
  // General case: broadcast the batch dims, then bmm.
  const int64_t n = da == 1 ? 1 : self.size(-2);
  const int64_t m = db == 1 ? 1 : other.size(-1);
  const IntList batch_a = da > 2 ? IntList(self.sizes().begin(), self.sizes().end() - 2) : IntList{};
  const IntList batch_b =
      db > 2 ? IntList(other.sizes().begin(), other.sizes().end() - 2) : IntList{};
  const IntList batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t nb = numel_of(batch);
  const Tensor a3 = (da == 1 ? self.reshape({1, k}) : self)
                        .expand(concat(batch, {n, k}))
                        .reshape({nb, n, k});
  const Tensor b3 = (db == 1 ? other.reshape({k, 1}) : other)
                        .expand(concat(batch, {k, m}))
                        .reshape({nb, k, m});
  IntList out_shape = batch;
  if (da > 1) out_shape.push_back(n);
  if (db > 1) out_shape.push_back(m);
  return bmm(a3, b3).reshape(out_shape);
}

Tensor Tensor::matmul(const Tensor& other) const { return loom::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return loom::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return loom::bmm(*this, other); }

}  // namespace loom
