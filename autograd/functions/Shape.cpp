// Views and copies: forward through native/Views and native/Copy, backward
// rules below.  A view's backward maps the gradient back onto the input's
// shape: reshape-like views reshape it, permutations permute it back, and
// views that keep part of the input (narrow, select, slice) write it into
// zeros of the input's shape ("view_scatter").  Backward rules use
// differentiable ops only, so create_graph works through them.
#include "autograd/functions/Shape.h"

#include <functional>

#include "autograd/functions/Record.h"
#include "autograd/functions/Reduction.h"
#include "tensor/Factory.h"
#include "tensor/Print.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Views.h"

namespace loom {

using autograd::Node;
using autograd::record;

namespace {

// Re-applies a view to any tensor of the viewed tensor's shape.
using ViewFn = std::function<Tensor(const Tensor&)>;

// Backward of view/reshape/flatten/squeeze/unsqueeze: reshape back.
class ReshapeBackward final : public Node {
 public:
  ReshapeBackward(IntList sizes, std::string name = "ReshapeBackward")
      : sizes_(std::move(sizes)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].reshape(sizes_)};
  }

 private:
  IntList sizes_;
  std::string name_;
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

class PermuteBackward final : public Node {
 public:
  explicit PermuteBackward(IntList inverse) : inverse_(std::move(inverse)) {}
  std::string name() const override { return "PermuteBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].permute(inverse_)};
  }

 private:
  IntList inverse_;
};

class TransposeBackward final : public Node {
 public:
  TransposeBackward(int64_t dim0, int64_t dim1) : dim0_(dim0), dim1_(dim1) {}
  std::string name() const override { return "TransposeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].transpose(dim0_, dim1_)};
  }

 private:
  int64_t dim0_, dim1_;
};

// Backward of view_scatter: the gradient of the part is that view of the grad.
class ViewScatterBackward final : public Node {
 public:
  explicit ViewScatterBackward(ViewFn view) : view_(std::move(view)) {}
  std::string name() const override { return "ViewScatterBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {view_(grads[0])}; }

 private:
  ViewFn view_;
};

// Zeros of `sizes` with `part` written into view(zeros); differentiable in part.
Tensor view_scatter(const Tensor& part, const IntList& sizes, const ViewFn& view) {
  Tensor out = zeros(sizes, TensorOptions(part.dtype()).device(part.device()));
  native::copy_(view(out), part);
  record<ViewScatterBackward>({part}, {out}, view);
  return out;
}

// Backward of narrow/select/slice: the gradient lands in that part of zeros.
class PartBackward final : public Node {
 public:
  PartBackward(std::string name, IntList sizes, ViewFn view)
      : name_(std::move(name)), sizes_(std::move(sizes)), view_(std::move(view)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {view_scatter(grads[0], sizes_, view_)};
  }

 private:
  std::string name_;
  IntList sizes_;
  ViewFn view_;
};

// The storage index of every element of a (sizes, strides, offset) view, as
// an int64 tensor of shape `sizes` on `device`.
Tensor storage_indices(const IntList& sizes, const IntList& strides, int64_t offset,
                       Device device) {
  Tensor out = empty(sizes, kInt64);
  int64_t* p = out.data_ptr<int64_t>();
  const int64_t rank = static_cast<int64_t>(sizes.size());
  IntList idx(rank, 0);
  for (int64_t n = 0; n < out.numel(); ++n) {
    int64_t off = offset;
    for (int64_t d = 0; d < rank; ++d) off += idx[d] * strides[d];
    p[n] = off;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return native::to(out, device, kInt64);
}

int64_t max_index(const Tensor& indices) {
  int64_t m = -1;
  for (int64_t v : indices.to_vector<int64_t>()) m = std::max(m, v);
  return m;
}

// Backward of as_strided: the gradient is summed into the storage elements
// the output covers (an element may appear several times), then read back in
// the input's layout.  An input whose own elements overlap (an expanded
// tensor) gets every alias's full gradient.
class AsStridedBackward final : public Node {
 public:
  AsStridedBackward(const Tensor& input, const Tensor& output)
      : in_sizes_(input.sizes()),
        in_index_(storage_indices(input.sizes(), input.strides(), input.storage_offset(),
                                  input.device())),
        out_index_(storage_indices(output.sizes(), output.strides(), output.storage_offset(),
                                   output.device())),
        extent_(1 + std::max(max_index(in_index_), max_index(out_index_))) {}
  std::string name() const override { return "AsStridedBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor storage = zeros({extent_}, TensorOptions(g.dtype()).device(g.device()));
    const Tensor summed =
        index_add(storage, 0, out_index_.reshape({-1}), g.reshape({-1}));
    return {summed.index_select(0, in_index_.reshape({-1})).reshape(in_sizes_)};
  }

 private:
  IntList in_sizes_;
  Tensor in_index_, out_index_;
  int64_t extent_;
};

// Backward of split/chunk (one node, one output per piece): join the pieces' grads.
class SplitBackward final : public Node {
 public:
  SplitBackward(int64_t dim, DType dtype) : dim_(dim), dtype_(dtype) {}
  std::string name() const override { return "SplitBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {cat(grads, dim_).to(dtype_)};
  }

 private:
  int64_t dim_;
  DType dtype_;
};

class UnbindBackward final : public Node {
 public:
  explicit UnbindBackward(int64_t dim) : dim_(dim) {}
  std::string name() const override { return "UnbindBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {stack(grads, dim_)}; }

 private:
  int64_t dim_;
};

// Backward of to(device/dtype): the gradient goes back to the source's
// device and dtype.  Runs on the destination device's thread.
class ToCopyBackward final : public Node {
 public:
  ToCopyBackward(Device device, DType dtype) : device_(device), dtype_(dtype) {}
  std::string name() const override { return "ToCopyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].to(device_, dtype_)};
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

// Backward of self.copy_(src): self's old values were overwritten (zero
// gradient); src was broadcast and converted into self.
class CopyBackward final : public Node {
 public:
  CopyBackward(IntList src_sizes, Device src_device, DType src_dtype)
      : src_sizes_(std::move(src_sizes)), src_device_(src_device), src_dtype_(src_dtype) {}
  std::string name() const override { return "CopyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor g_self, g_src;
    if (needs_input_grad(0)) g_self = zeros_like(g);
    if (needs_input_grad(1)) g_src = sum_to(g, src_sizes_).to(src_device_, src_dtype_);
    return {g_self, g_src};
  }

 private:
  IntList src_sizes_;
  Device src_device_;
  DType src_dtype_;
};

Tensor to_impl(const Tensor& self, Device device, DType dtype, bool non_blocking = false) {
  Tensor out = native::to(self, device, dtype, non_blocking);
  if (out.is_same(self)) return self;
  if (out.is_floating_point() && self.is_floating_point()) {
    auto node = record<ToCopyBackward>({self}, {out}, self.device(), self.dtype());
    if (node && out.device() != self.device()) node->set_sequence_nr(autograd::kHandOverPriority);
  }
  return out;
}

// A view whose backward writes the gradient into `view` of zeros.
Tensor part_view(const Tensor& self, const char* name, const ViewFn& raw, const ViewFn& view) {
  Tensor out = raw(self);
  record<PartBackward>({self}, {out}, name, self.sizes(), view);
  return out;
}

// Records one node for all pieces of a split.
std::vector<Tensor> record_split(const Tensor& self, std::vector<Tensor> pieces, int64_t dim) {
  if (self.is_floating_point()) record<SplitBackward>({self}, pieces, dim, self.dtype());
  return pieces;
}

std::string grad_fn_name(const Tensor& t) {
  const auto fn = t.grad_fn();
  return fn ? fn->name() : std::string();
}

// Lets operator<< (tensor/Print.cpp) print grad_fn names.
[[maybe_unused]] const bool kGradFnNamerInstalled = (set_grad_fn_namer(&grad_fn_name), true);

}  // namespace

// ---- copies ---------------------------------------------------------------------

Tensor Tensor::to(Device device, bool non_blocking) const {
  return to_impl(*this, device, dtype(), non_blocking);
}
Tensor Tensor::to(DType dtype) const { return to_impl(*this, device(), dtype); }
Tensor Tensor::to(Device device, DType dtype) const { return to_impl(*this, device, dtype); }

Tensor Tensor::clone() const {
  Tensor out = native::clone(*this);
  record<CloneBackward>({*this}, {out});
  return out;
}

Tensor Tensor::contiguous() const { return contiguous(MemoryFormat::kContiguous); }

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (is_contiguous(format)) return *this;
  Tensor out = native::contiguous(*this, format);
  record<CloneBackward>({*this}, {out});
  return out;
}

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  native::check_defined("copy_", *this, "self");
  native::check_defined("copy_", src, "src");
  if (!autograd::any_requires_grad({this, &src}) || !is_floating_point()) {
    native::copy_(*this, src, non_blocking);
    return *this;
  }
  autograd::check_inplace(*this, "copy_");
  native::copy_(*this, src, non_blocking);
  auto node = std::make_shared<CopyBackward>(src.sizes(), src.device(), src.dtype());
  autograd::set_history(node, {*this, src}, {*this});
  if (src.device() != device()) node->set_sequence_nr(autograd::kHandOverPriority);
  return *this;
}

// ---- views ----------------------------------------------------------------------

Tensor Tensor::view(IntList sizes) const {
  Tensor out = native::view(*this, std::move(sizes));
  record<ReshapeBackward>({*this}, {out}, this->sizes(), "ViewBackward");
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

Tensor Tensor::permute(IntList dims) const {
  Tensor out = native::permute(*this, dims);
  if (autograd::any_requires_grad({this})) {
    IntList inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], dim(), "permute")] = i;
    record<PermuteBackward>({*this}, {out}, inverse);
  }
  return out;
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  Tensor out = native::transpose(*this, dim0, dim1);
  record<TransposeBackward>({*this}, {out}, dim0, dim1);
  return out;
}

Tensor Tensor::t() const {
  native::check_defined("t", *this, "self");
  LOOM_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but self is ", dim(),
             "-D ", describe(), "; use transpose(dim0, dim1) or permute()");
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  auto raw = [=](const Tensor& t) { return native::narrow(t, d, start, length); };
  auto view = [=](const Tensor& t) { return t.narrow(d, start, length); };
  return part_view(*this, "NarrowBackward", raw, view);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  auto raw = [=](const Tensor& t) { return native::select(t, d, index); };
  auto view = [=](const Tensor& t) { return t.select(d, index); };
  return part_view(*this, "SelectBackward", raw, view);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  auto raw = [=](const Tensor& t) { return native::slice(t, d, start, end, step); };
  auto view = [=](const Tensor& t) { return t.slice(d, start, end, step); };
  return part_view(*this, "SliceBackward", raw, view);
}

Tensor Tensor::squeeze() const {
  Tensor out = native::squeeze(*this);
  record<ReshapeBackward>({*this}, {out}, sizes(), "SqueezeBackward");
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  Tensor out = native::squeeze(*this, d);
  record<ReshapeBackward>({*this}, {out}, sizes(), "SqueezeBackward");
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  Tensor out = native::unsqueeze(*this, d);
  record<ReshapeBackward>({*this}, {out}, sizes(), "UnsqueezeBackward");
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  Tensor out = native::flatten(*this, start_dim, end_dim);
  record<ReshapeBackward>({*this}, {out}, sizes(), "FlattenBackward");
  return out;
}

Tensor Tensor::as_strided(IntList sizes, IntList strides, int64_t storage_offset) const {
  Tensor out = native::as_strided(*this, std::move(sizes), std::move(strides), storage_offset);
  if (autograd::any_requires_grad({this}))
    record<AsStridedBackward>({*this}, {out}, *this, out);
  return out;
}

// ---- splits -----------------------------------------------------------------------

std::vector<Tensor> Tensor::split_with_sizes(IntList split_sizes, int64_t d) const {
  native::check_defined("split_with_sizes", *this, "self");
  LOOM_CHECK(dim() > 0, "split_with_sizes: cannot split a 0-dimensional tensor");
  d = wrap_dim(d, dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    LOOM_CHECK(s >= 0, "split_with_sizes: split sizes must be non-negative, got ",
               shape_str(split_sizes));
    total += s;
  }
  LOOM_CHECK(total == size(d), "split_with_sizes: split sizes ", shape_str(split_sizes),
             " must sum to the size of dimension ", d, " (", size(d), ") of ", describe(),
             ", but they sum to ", total);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    pieces.push_back(native::narrow(*this, d, start, s));
    start += s;
  }
  return record_split(*this, std::move(pieces), d);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  native::check_defined("split", *this, "self");
  LOOM_CHECK(dim() > 0, "split: cannot split a 0-dimensional tensor");
  d = wrap_dim(d, dim(), "split");
  const int64_t n = size(d);
  LOOM_CHECK(split_size > 0 || (split_size == 0 && n == 0),
             "split: split_size must be positive, got ", split_size, " for dimension ", d,
             " of size ", n);
  IntList sizes;
  for (int64_t start = 0; start < n; start += split_size)
    sizes.push_back(std::min(split_size, n - start));
  if (sizes.empty()) sizes.push_back(0);  // one empty piece, as PyTorch
  return split_with_sizes(sizes, d);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  native::check_defined("chunk", *this, "self");
  LOOM_CHECK(dim() > 0, "chunk: cannot chunk a 0-dimensional tensor");
  LOOM_CHECK(chunks > 0, "chunk: number of chunks must be greater than 0, got ", chunks);
  d = wrap_dim(d, dim(), "chunk");
  const int64_t n = size(d);
  if (n == 0) return split_with_sizes(IntList(chunks, 0), d);
  return split((n + chunks - 1) / chunks, d);
}

std::vector<Tensor> Tensor::unbind(int64_t d) const {
  native::check_defined("unbind", *this, "self");
  LOOM_CHECK(dim() > 0, "unbind: cannot unbind a 0-dimensional tensor");
  d = wrap_dim(d, dim(), "unbind");
  std::vector<Tensor> pieces;
  for (int64_t i = 0; i < size(d); ++i) pieces.push_back(native::select(*this, d, i));
  if (is_floating_point() && !pieces.empty()) record<UnbindBackward>({*this}, pieces, d);
  return pieces;
}

}  // namespace loom
