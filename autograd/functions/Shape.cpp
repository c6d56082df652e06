// Views, copies and joins: forward through native/Views and native/Copy,
// backward rules below.  A view's backward maps the gradient back onto the
// base's shape.
#include "autograd/functions/Shape.h"

#include "autograd/functions/Record.h"
#include "autograd/functions/Reduction.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {

using autograd::Node;
using autograd::record;

namespace {

// Backward of view/reshape/flatten/squeeze/unsqueeze: reshape back.
class ReshapeBackward final : public Node {
 public:
  explicit ReshapeBackward(IntList sizes) : sizes_(std::move(sizes)) {}
  std::string name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].reshape(sizes_)};
  }

 private:
  IntList sizes_;
};

class ExpandBackward final : public Node {
 public:
  explicit ExpandBackward(IntList sizes) : sizes_(std::move(sizes)) {}
  std::string name() const override { return "ExpandBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {sum_to(grads[0], sizes_)};
  }

 private:
  IntList sizes_;
};

// Backward of to(device/dtype): the gradient goes back to the source's
// device and dtype.  Runs on the destination device's thread.
class ToCopyBackward final : public Node {
 public:
  ToCopyBackward(Device device, DType dtype) : device_(device), dtype_(dtype) {}
  std::string name() const override { return "ToCopyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::to(grads[0], device_, dtype_)};
  }

 private:
  Device device_;
  DType dtype_;
};

class CloneBackward final : public Node {
 public:
  std::string name() const override { return "CloneBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {grads[0]}; }
};

Tensor to_impl(const Tensor& self, Device device, DType dtype) {
  Tensor out = native::to(self, device, dtype);
  if (out.is_same(self)) return self;
  if (out.is_floating_point() && self.is_floating_point())
    record<ToCopyBackward>({self}, {out}, self.device(), self.dtype());
  return out;
}

}  // namespace

Tensor Tensor::to(Device device, bool /*non_blocking*/) const { return to_impl(*this, device, dtype()); }
Tensor Tensor::to(DType dtype) const { return to_impl(*this, device(), dtype); }
Tensor Tensor::to(Device device, DType dtype) const { return to_impl(*this, device, dtype); }

Tensor Tensor::clone() const {
  Tensor out = native::clone(*this);
  record<CloneBackward>({*this}, {out});
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::view(IntList sizes) const {
  Tensor out = native::view(*this, std::move(sizes));
  record<ReshapeBackward>({*this}, {out}, this->sizes());
  return out;
}

Tensor Tensor::reshape(IntList sizes) const {
  Tensor out = native::reshape(*this, std::move(sizes));
  record<ReshapeBackward>({*this}, {out}, this->sizes());
  return out;
}

Tensor Tensor::expand(IntList sizes) const {
  Tensor out = native::expand(*this, std::move(sizes));
  record<ExpandBackward>({*this}, {out}, this->sizes());
  return out;
}

Tensor Tensor::expand_as(const Tensor& other) const { return expand(other.sizes()); }

}  // namespace loom
