// Forward-and-backward CPU-vs-CUDA parity for the gpu-tagged tests of
// differentiable ops: runs an op through autograd on CPU leaves and on CUDA
// copies of them, backpropagates sum(out * r) for one fixed random r (so every
// output element gets its own upstream gradient), and compares the outputs and
// the gradients of every input that asked for one (testing_cuda::Parity).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/CudaTestUtil.h"

namespace loom {
namespace testing_cuda {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;
using ViewFn = std::function<Tensor(const Tensor&)>;

// inputs: CPU tensors; grad[i]: whether input i requires grad (floating
// only).  view, when given, is applied to every leaf on both devices before
// fn (to feed transposed or narrowed layouts).
inline ::testing::AssertionResult ForwardBackwardParity(const OpFn& fn,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<bool>& grad,
                                                        const ViewFn& view = nullptr,
                                                        double atol32 = 1e-6) {
  std::vector<Tensor> host_leaves, dev_leaves, host, dev;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor h = inputs[i].detach().clone();
    Tensor d = inputs[i].detach().to(kGpu);
    const bool g = i < grad.size() && grad[i];
    if (g) {
      h.requires_grad_();
      d.requires_grad_();
    }
    host_leaves.push_back(h);
    dev_leaves.push_back(d);
    host.push_back(view ? view(h) : h);
    dev.push_back(view ? view(d) : d);
  }
  const Tensor out_h = fn(host), out_d = fn(dev);
  auto r = Parity(out_d.detach(), out_h.detach(), atol32);
  if (!r) return ::testing::AssertionFailure() << "forward: " << r.message();
  if (!out_h.requires_grad()) return ::testing::AssertionSuccess();
  const Tensor weights = sample(out_h.dtype(), out_h.sizes(), 4242, -1.0, 1.0);
  (out_h * weights).sum().backward();
  (out_d * weights.to(kGpu)).sum().backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!(i < grad.size() && grad[i])) continue;
    const Tensor gh = host_leaves[i].grad(), gd = dev_leaves[i].grad();
    if (gh.defined() != gd.defined())
      return ::testing::AssertionFailure() << "gradient of input " << i << " defined on one side";
    if (!gh.defined()) continue;
    auto g = Parity(gd, gh, atol32);
    if (!g) return ::testing::AssertionFailure() << "gradient of input " << i << ": " << g.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing_cuda
}  // namespace loom
