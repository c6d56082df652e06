// Module parity with torch.nn: a test lists cases (a loom module, the
// torch.nn expression that builds the same module, inputs), and one Python
// run (tools/pyloom/module_parity.py) computes every case's output and input
// gradient in PyTorch 1.13; each is compared with loom's, shapes first.
//
//   TorchModuleCases cases;
//   cases.add("pool", nn::AvgPool2d(3), "nn.AvgPool2d(3)", randn({2, 3, 7, 7}));
//   cases.check(1e-6);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/PythonRef.h"

namespace loom {
namespace testing {

class TorchModuleCases {
 public:
  // Forward of a loom module: (input, target) -> output.  Target is undefined
  // for one-input modules.
  using Forward = std::function<Tensor(const Tensor& input, const Tensor& target)>;

  // A one-input module (pooling, identity).
  template <typename Holder>
  void add(const std::string& name, Holder module, const std::string& torch_expr, Tensor input) {
    add_case(name, [module](const Tensor& x, const Tensor&) mutable { return module(x); },
             torch_expr, std::move(input), Tensor(), Tensor());
  }
  // A loss: module(input, target); `weight`, when defined, is what the torch
  // expression calls `weight`.
  template <typename Holder>
  void add_loss(const std::string& name, Holder module, const std::string& torch_expr,
                Tensor input, Tensor target, Tensor weight = Tensor()) {
    add_case(name, [module](const Tensor& x, const Tensor& t) mutable { return module(x, t); },
             torch_expr, std::move(input), std::move(target), std::move(weight));
  }

  // Runs every case in loom and in PyTorch and expects outputs and input
  // gradients to agree within `tolerance` (relative_error), shapes exactly.
  void check(double tolerance) {
    const std::string dir = make_temp_dir();
    nn::StateDict inputs;
    nn::Metadata exprs;
    for (Case& c : cases_) {
      exprs[c.name] = c.torch_expr;
      inputs.insert(c.name + ".input", c.input);
      if (c.target.defined()) inputs.insert(c.name + ".target", c.target);
      if (c.weight.defined()) inputs.insert(c.name + ".weight", c.weight);
      // A fixed, non-uniform gradient exercises backward beyond sum().
      Tensor x = c.input.detach().requires_grad_();  // keeps the input's strides
      c.output = c.forward(x, c.target);
      std::vector<double> g(static_cast<size_t>(c.output.numel()));
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.25 * static_cast<double>(i % 7) - 0.75;
      c.grad_output = tensor<double>(g, c.output.sizes()).to(c.output.dtype());
      inputs.insert(c.name + ".grad_output", c.grad_output);
      c.output.backward(c.grad_output);
      c.grad_input = x.grad();
    }
    nn::save(inputs, dir + "/in.safetensors", exprs);
    std::string log;
    const int rc = run_python("module_parity.py", dir + "/in.safetensors " + dir + "/out.safetensors", log);
    ASSERT_EQ(rc, 0) << "PyTorch reference failed (is python3-torch installed?):\n" << log;
    const nn::StateDict ref = nn::load(dir + "/out.safetensors");
    for (const Case& c : cases_) {
      EXPECT_TRUE(RelativeErrorAtMost(c.output, ref.at(c.name + ".output"), tolerance))
          << c.name << " output (" << c.torch_expr << ")";
      ASSERT_TRUE(c.grad_input.defined()) << c.name << ": no gradient reached the input";
      EXPECT_TRUE(RelativeErrorAtMost(c.grad_input, ref.at(c.name + ".grad_input"), tolerance))
          << c.name << " input gradient (" << c.torch_expr << ")";
    }
  }

 private:
  struct Case {
    std::string name;
    Forward forward;
    std::string torch_expr;
    Tensor input, target, weight;
    Tensor output, grad_output, grad_input;
  };

  void add_case(const std::string& name, Forward forward, const std::string& torch_expr,
                Tensor input, Tensor target, Tensor weight) {
    for (const Case& c : cases_) LOOM_CHECK(c.name != name, "TorchModuleCases: duplicate case ", name);
    cases_.push_back({name, std::move(forward), torch_expr, std::move(input), std::move(target),
                      std::move(weight), {}, {}, {}});
  }

  std::vector<Case> cases_;
};

}  // namespace testing
}  // namespace loom
