// Tensor's autograd methods: backward, hooks, retain_grad.
#include "autograd/Engine.h"
#include "autograd/GradMode.h"
#include "tensor/native/Copy.h"

namespace loom {

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  LOOM_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that "
             "doesn't require gradient ", describe());
  if (auto fn = grad_fn()) {
    fn->add_pre_hook(output_nr(), std::move(hook));
  } else {
    autograd_meta().leaf_hooks.push_back(std::move(hook));
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const {
  LOOM_CHECK(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook: only leaf "
             "tensors that require grad accumulate a gradient, got ", describe());
  autograd_meta().post_accumulate_hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  LOOM_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that has "
             "requires_grad=false ", describe());
  if (is_leaf() || retains_grad()) return;
  autograd_meta().retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_ptr();
  grad_fn()->add_pre_hook(output_nr(), [weak](const Tensor& grad) {
    if (auto impl = weak.lock()) {
      Tensor self(impl);
      Tensor existing = self.grad();
      autograd::NoGradGuard no_grad;
      self.set_grad(existing.defined() ? existing + grad : native::clone(grad));
    }
    return Tensor();
  });
}

}  // namespace loom
