// Reductions and softmax: forward through native/Reduce and native/Softmax,
// backward rules below.  A reduced gradient is reshaped back to the input's
// rank (reduced dims as 1) and broadcast; value-selecting reductions
// (max/min along a dim) scatter it to the chosen elements.
#include "autograd/functions/Reduction.h"
#include "autograd/Autocast.h"

#include "autograd/functions/Elementwise.h"
#include "autograd/functions/Record.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Reduce.h"
#include "tensor/native/Softmax.h"
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

// Number of elements each output of a reduction over `mask` combines.
int64_t reduced_count(const IntList& sizes, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (mask[d]) n *= sizes[d];
  return n;
}

IntList masked_dims(const std::vector<bool>& mask) {
  IntList dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
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

// d mean / dx = 1/n for every element of the reduced group.
class MeanBackward final : public Node {
 public:
  MeanBackward(IntList sizes, std::vector<bool> mask, bool keepdim)
      : sizes_(std::move(sizes)), mask_(std::move(mask)), keepdim_(keepdim) {}
  std::string name() const override { return "MeanBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const double n = static_cast<double>(reduced_count(sizes_, mask_));
    return {unsqueeze_reduced(grads[0] / n, sizes_, mask_, keepdim_).expand(sizes_)};
  }

 private:
  IntList sizes_;
  std::vector<bool> mask_;
  bool keepdim_;
};

// var: g * 2 (x - mean) / (n - c).  std: g * (x - mean) / ((n - c) * std).
class VarBackward final : public Node {
 public:
  VarBackward(std::vector<bool> mask, int64_t correction, bool keepdim, bool is_std)
      : mask_(std::move(mask)), correction_(correction), keepdim_(keepdim), is_std_(is_std) {}
  std::string name() const override { return is_std_ ? "StdBackward" : "VarBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = self.unpack(*this);
    const double divisor = static_cast<double>(
        std::max<int64_t>(0, reduced_count(x.sizes(), mask_) - correction_));
    const Tensor centered = x - loom::mean(x, masked_dims(mask_), true);
    Tensor g = unsqueeze_reduced(grads[0], x.sizes(), mask_, keepdim_);
    if (is_std_) {
      g = g / unsqueeze_reduced(result.unpack(*this), x.sizes(), mask_, keepdim_);
      return {g * centered / divisor};
    }
    return {g * centered * (2.0 / divisor)};
  }
  void release_saved() override {
    self.reset();
    result.reset();
  }
  SavedTensor self, result;

 private:
  std::vector<bool> mask_;
  int64_t correction_;
  bool keepdim_;
  bool is_std_;
};

// max()/min() of all elements: the gradient is shared evenly by the elements
// equal to the result (PyTorch's rule for ties).
class ExtremumAllBackward final : public Node {
 public:
  std::string name() const override { return "MaxMinAllBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = self.unpack(*this);
    const Tensor hit = eq(x, result.unpack(*this)).to(x.dtype());
    return {hit * (grads[0] / hit.sum())};
  }
  void release_saved() override {
    self.reset();
    result.reset();
  }
  SavedTensor self, result;
};

// max/min along a dim: the gradient goes to the selected element.
class ExtremumDimBackward final : public Node {
 public:
  ExtremumDimBackward(IntList sizes, int64_t dim, bool keepdim)
      : sizes_(std::move(sizes)), dim_(dim), keepdim_(keepdim) {}
  std::string name() const override { return "MaxMinDimBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {native::select_along_dim_backward(grads[0], indices.unpack(*this), sizes_, dim_,
                                              keepdim_)};
  }
  void release_saved() override { indices.reset(); }
  SavedTensor indices;

 private:
  IntList sizes_;
  int64_t dim_;
  bool keepdim_;
};

class SoftmaxBackward final : public Node {
 public:
  SoftmaxBackward(int64_t dim, bool log) : dim_(dim), log_(log) {}
  std::string name() const override { return log_ ? "LogSoftmaxBackward" : "SoftmaxBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor y = result.unpack(*this);
    return {log_ ? native::log_softmax_backward(grads[0], y, dim_)
                 : native::softmax_backward(grads[0], y, dim_)};
  }
  void release_saved() override { result.reset(); }
  SavedTensor result;

 private:
  int64_t dim_;
  bool log_;
};

Tensor var_impl(const Tensor& self, const IntList& dims, bool unbiased, bool keepdim,
                bool is_std) {
  const int64_t correction = unbiased ? 1 : 0;
  Tensor out = native::var(self, dims, correction, keepdim, is_std);
  const char* op = is_std ? "std" : "var";
  if (auto node = record<VarBackward>({self}, {out}, dim_mask(dims, self.dim(), op), correction,
                                      keepdim, is_std)) {
    node->self = SavedTensor(self, false);
    if (is_std) node->result = SavedTensor(out, true);
  }
  return out;
}

Tensor extremum_all(const Tensor& self, bool is_max) {
  Tensor out = is_max ? native::max(self) : native::min(self);
  if (out.is_floating_point())
    if (auto node = record<ExtremumAllBackward>({self}, {out})) {
      node->self = SavedTensor(self, false);
      node->result = SavedTensor(out, true);
    }
  return out;
}

std::tuple<Tensor, Tensor> extremum_dim(const Tensor& self, int64_t dim, bool keepdim,
                                        bool is_max) {
  auto [values, indices] =
      is_max ? native::max(self, dim, keepdim) : native::min(self, dim, keepdim);
  if (values.is_floating_point())
    if (auto node = record<ExtremumDimBackward>({self}, {values}, self.sizes(), dim, keepdim))
      node->indices = SavedTensor(indices, false);
  return {values, indices};
}

Tensor softmax_impl(const Tensor& self, int64_t dim, bool log) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs(log ? "log_softmax" : "softmax", {self});
    amp::detail::SuspendAutocast suspend;
    return softmax_impl(in[0], dim, log);
  }
  Tensor out = log ? native::log_softmax(self, dim) : native::softmax(self, dim);
  if (auto node = record<SoftmaxBackward>({self}, {out}, dim, log))
    node->result = SavedTensor(out, true);
  return out;
}

}  // namespace

Tensor sum(const Tensor& self, IntList dims, bool keepdim) {
  if (amp::detail::active()) {  // autograd/Autocast.h
    const std::vector<Tensor> in = amp::detail::cast_inputs("sum", {self});
    amp::detail::SuspendAutocast suspend;
    return sum(in[0], dims, keepdim);
  }
  Tensor out = native::sum(self, dims, keepdim);
  if (out.is_floating_point())
    record<SumBackward>({self}, {out}, self.sizes(), dim_mask(dims, self.dim(), "sum"), keepdim);
  return out;
}

Tensor mean(const Tensor& self, IntList dims, bool keepdim) {
  Tensor out = native::mean(self, dims, keepdim);
  record<MeanBackward>({self}, {out}, self.sizes(), dim_mask(dims, self.dim(), "mean"), keepdim);
  return out;
}

Tensor var(const Tensor& self, IntList dims, bool unbiased, bool keepdim) {
  return var_impl(self, dims, unbiased, keepdim, false);
}
Tensor std(const Tensor& self, IntList dims, bool unbiased, bool keepdim) {
  return var_impl(self, dims, unbiased, keepdim, true);
}

Tensor max(const Tensor& self) { return extremum_all(self, true); }
Tensor min(const Tensor& self) { return extremum_all(self, false); }
std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim) {
  return extremum_dim(self, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim) {
  return extremum_dim(self, dim, keepdim, false);
}
Tensor argmax(const Tensor& self) { return native::argmax(self); }
Tensor argmin(const Tensor& self) { return native::argmin(self); }
Tensor argmax(const Tensor& self, int64_t dim, bool keepdim) {
  return native::argmax(self, dim, keepdim);
}
Tensor argmin(const Tensor& self, int64_t dim, bool keepdim) {
  return native::argmin(self, dim, keepdim);
}

Tensor softmax(const Tensor& self, int64_t dim) { return softmax_impl(self, dim, false); }
Tensor log_softmax(const Tensor& self, int64_t dim) { return softmax_impl(self, dim, true); }

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

// ---- Tensor methods -------------------------------------------------------------

Tensor Tensor::sum() const { return loom::sum(*this); }
Tensor Tensor::sum(IntList dims, bool keepdim) const { return loom::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return loom::mean(*this); }
Tensor Tensor::mean(IntList dims, bool keepdim) const { return loom::mean(*this, dims, keepdim); }
Tensor Tensor::var(bool unbiased) const { return loom::var(*this, {}, unbiased); }
Tensor Tensor::var(IntList dims, bool unbiased, bool keepdim) const {
  return loom::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(bool unbiased) const { return loom::std(*this, {}, unbiased); }
Tensor Tensor::std(IntList dims, bool unbiased, bool keepdim) const {
  return loom::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::max() const { return loom::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return loom::max(*this, dim, keepdim);
}
Tensor Tensor::min() const { return loom::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return loom::min(*this, dim, keepdim);
}
Tensor Tensor::argmax() const { return loom::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return loom::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin() const { return loom::argmin(*this); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return loom::argmin(*this, dim, keepdim); }
Tensor Tensor::softmax(int64_t dim) const { return loom::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return loom::log_softmax(*this, dim); }

}  // namespace loom
