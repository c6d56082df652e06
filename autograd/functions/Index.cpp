// Indexing (declared in Shape.h): index_select, index_add, gather,
// scatter_add through native/Index.  The backward rules pair them up:
// index_select <-> index_add and gather <-> scatter_add, each the other's
// adjoint, so gradients of any order stay within these four ops.
#include "autograd/functions/Record.h"
#include "autograd/functions/Shape.h"
#include "tensor/Factory.h"
#include "tensor/native/Index.h"

namespace loom {

using autograd::Node;
using autograd::record;
using autograd::SavedTensor;

namespace {

Tensor zeros_of(const IntList& sizes, const Tensor& like) {
  return zeros(sizes, TensorOptions(like.dtype()).device(like.device()));
}

class IndexSelectBackward final : public Node {
 public:
  IndexSelectBackward(int64_t dim, IntList self_sizes, const Tensor& index)
      : dim_(dim), self_sizes_(std::move(self_sizes)), index_(index, false) {}
  std::string name() const override { return "IndexSelectBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    return {index_add(zeros_of(self_sizes_, g), dim_, index_.unpack(*this), g)};
  }
  void release_saved() override { index_.reset(); }

 private:
  int64_t dim_;
  IntList self_sizes_;
  SavedTensor index_;
};

class IndexAddBackward final : public Node {
 public:
  IndexAddBackward(int64_t dim, const Tensor& index) : dim_(dim), index_(index, false) {}
  std::string name() const override { return "IndexAddBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor g_source;
    if (needs_input_grad(1)) g_source = g.index_select(dim_, index_.unpack(*this));
    return {g, g_source};
  }
  void release_saved() override { index_.reset(); }

 private:
  int64_t dim_;
  SavedTensor index_;
};

class GatherBackward final : public Node {
 public:
  GatherBackward(int64_t dim, IntList self_sizes, const Tensor& index)
      : dim_(dim), self_sizes_(std::move(self_sizes)), index_(index, false) {}
  std::string name() const override { return "GatherBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    return {scatter_add(zeros_of(self_sizes_, g), dim_, index_.unpack(*this), g)};
  }
  void release_saved() override { index_.reset(); }

 private:
  int64_t dim_;
  IntList self_sizes_;
  SavedTensor index_;
};

class ScatterAddBackward final : public Node {
 public:
  ScatterAddBackward(int64_t dim, IntList src_sizes, const Tensor& index)
      : dim_(dim), src_sizes_(std::move(src_sizes)), index_(index, false) {}
  std::string name() const override { return "ScatterAddBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor g_src;
    if (needs_input_grad(1)) {
      // src entries beyond index's extent were not used: pad with zeros.
      g_src = g.gather(dim_, index_.unpack(*this));
      for (int64_t d = 0; d < g_src.dim(); ++d) {
        const int64_t missing = src_sizes_[d] - g_src.sizes()[d];
        if (missing == 0) continue;
        IntList pad = g_src.sizes();
        pad[d] = missing;
        g_src = cat({g_src, zeros_of(pad, g)}, d);
      }
    }
    return {g, g_src};
  }
  void release_saved() override { index_.reset(); }

 private:
  int64_t dim_;
  IntList src_sizes_;
  SavedTensor index_;
};

int64_t wrapped(int64_t dim, const Tensor& self, const char* op) {
  return wrap_dim(dim, self.dim(), op);
}

}  // namespace

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = native::index_select(self, dim, index);
  if (out.is_floating_point())
    record<IndexSelectBackward>({self}, {out}, wrapped(dim, self, "index_select"), self.sizes(),
                                index);
  return out;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  Tensor out = native::index_add(self, dim, index, source);
  if (out.is_floating_point())
    record<IndexAddBackward>({self, source}, {out}, wrapped(dim, self, "index_add"), index);
  return out;
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = native::gather(self, dim, index);
  if (out.is_floating_point())
    record<GatherBackward>({self}, {out}, wrapped(dim, self, "gather"), self.sizes(), index);
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = native::scatter_add(self, dim, index, src);
  if (out.is_floating_point())
    record<ScatterAddBackward>({self, src}, {out}, wrapped(dim, self, "scatter_add"), src.sizes(),
                               index);
  return out;
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return loom::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return loom::gather(*this, dim, index);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return loom::scatter_add(*this, dim, index, src);
}

}  // namespace loom
