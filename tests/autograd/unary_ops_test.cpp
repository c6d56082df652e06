// Every op of the unary table (tensor/native/UnaryOps.h), walked from the
// table itself: forward and gradient against PyTorch 1.13 (float64, values
// on both sides of every kink, parameters other than the defaults too), the
// fused backward kernel against the same formula run on tensors
// (create_graph), gradchecks, second derivatives for ops whose rule reads
// the input, and the dtype rules, in-place forms and errors of the
// activations.  An op added to the table is tested here once its PyTorch
// counterpart is in tools/pyloom/unary_ops.py's REFERENCE.
#include <cmath>
#include <string>
#include <vector>

#include "tensor/native/Unary.h"
#include "tests/PythonRef.h"

namespace loom {
namespace {

using native::UnaryOp;
using optable::UnaryArgs;
using testing::GradOk;
using Inputs = std::vector<Tensor>;

struct OpCase {
  UnaryOp op;
  std::string spec;  // "name[:arg[:arg]]", as tools/pyloom/unary_ops.py reads it
  UnaryArgs args;
};

// Every table op with its defaults, then the parameterised ones with other
// parameters (PyTorch's positional order).
std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  optable::for_each_op(optable::UnaryOpList{}, [&](auto tag) {
    using Op = typename decltype(tag)::type;
    cases.push_back({native::unary_op<Op>(), Op::name, {}});
  });
  cases.push_back({native::unary_op<optable::LeakyRelu>(), "leaky_relu:0.2", {0.2}});
  cases.push_back({native::unary_op<optable::Elu>(), "elu:0.5", {0.5}});
  cases.push_back({native::unary_op<optable::Softplus>(), "softplus:2:1", {2, 1}});
  return cases;
}

bool has_nan(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (std::isnan(v)) return true;
  return false;
}

bool saves_input_or_nothing(UnaryOp op) {
  optable::UnarySaves saves = optable::UnarySaves::kNothing;
  native::visit_unary_op(op, [&](auto tag) { saves = decltype(tag)::type::saves; });
  return saves != optable::UnarySaves::kOutput;
}

// Kinks and saturation points of the activations, then random values.
Tensor sample_x() {
  std::vector<double> v = {-30, -6, -3.5, -3, -2.9, -1, -0.5, -1e-9, 0, 1e-9,
                           0.3, 1,  2.5,  3,  3.2,  6,  6.5,  25};
  Generator gen(11);
  for (double r : (randn({24}, kFloat64, &gen) * 3.0).to_vector<double>()) v.push_back(r);
  return tensor<double>(v);
}

// Elementwise |a - b| <= atol + rtol * |b|, nan matching nan; shapes first.
// rtol 1e-7 in float64 because PyTorch's hardsigmoid multiplies by 1/6
// rounded to float32 (3e-8 off); every other op agrees to ~1e-15.
::testing::AssertionResult Matches(const Tensor& actual, const Tensor& expected,
                                   double rtol = 1e-7, double atol = 1e-12) {
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << actual.describe() << " vs expected "
                                         << expected.describe();
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool close = a[i] == e[i] || std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
    if (!both_nan && !close)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected "
                                           << e[i];
  }
  return ::testing::AssertionSuccess();
}

Tensor grad_of(UnaryOp op, const UnaryArgs& args, const Tensor& x0, const Tensor& g,
               bool create_graph) {
  Tensor x = x0.detach().requires_grad_();
  Tensor y = apply_unary(op, x, args);
  return autograd::grad({y}, {x}, {g}, false, create_graph)[0].detach();
}

TEST(UnaryOps, ForwardAndGradientMatchPyTorch) {
  const std::vector<OpCase> cases = all_cases();
  const Tensor x = sample_x();
  Generator gen(12);
  const Tensor g = randn(x.sizes(), kFloat64, &gen);
  const std::string dir = testing::make_temp_dir();
  nn::StateDict in;
  in.insert("x", x);
  in.insert("grad", g);
  nn::save(in, dir + "/in.safetensors");
  std::string specs, output;
  for (const OpCase& c : cases) specs += " " + c.spec;
  const int rc = testing::run_python("unary_ops.py", dir + "/in.safetensors " + dir +
                                                         "/out.safetensors" + specs,
                                     output);
  ASSERT_EQ(rc, 0) << "PyTorch reference failed:\n" << output;
  const nn::StateDict ref = nn::load(dir + "/out.safetensors");
  for (const OpCase& c : cases) {
    EXPECT_TRUE(Matches(apply_unary(c.op, x, c.args), ref.at(c.spec + ".out"))) << c.spec;
    EXPECT_TRUE(Matches(grad_of(c.op, c.args, x, g, false), ref.at(c.spec + ".grad")))
        << c.spec << " gradient";
  }
}

TEST(UnaryOps, FusedBackwardEqualsTheFormulaOnTensors) {
  const Tensor x = sample_x();
  Generator gen(13);
  const Tensor g = randn(x.sizes(), kFloat64, &gen);
  for (const OpCase& c : all_cases())
    EXPECT_TRUE(Matches(grad_of(c.op, c.args, x, g, false), grad_of(c.op, c.args, x, g, true),
                        1e-12, 1e-14))
        << c.spec;
}

TEST(UnaryOps, Gradcheck) {
  for (const OpCase& c : all_cases()) {
    Tensor x = testing::random_leaf({3, 4}, 14).detach() * 2.0;
    // Ops defined for positive inputs only (log, sqrt, ...) get positive ones.
    if (has_nan(apply_unary(c.op, x, c.args))) x = x.abs() + 0.5;
    x.requires_grad_();
    EXPECT_TRUE(GradOk([&](const Inputs& in) { return apply_unary(c.op, in[0], c.args); }, {x}))
        << c.spec;
    // Non-contiguous input.
    Tensor t = x.detach().t().contiguous().t().requires_grad_();
    EXPECT_TRUE(GradOk([&](const Inputs& in) { return apply_unary(c.op, in[0], c.args); }, {t}))
        << c.spec << " transposed";
  }
}

// d/dx of sum(op(x)) as a differentiable function of x.
Tensor first_derivative(const OpCase& c, const Tensor& x) {
  autograd::AutoGradMode enable(true);
  return autograd::grad({apply_unary(c.op, x, c.args).sum()}, {x}, {}, true, true)[0];
}

TEST(UnaryOps, SecondDerivativesWhereTheRuleReadsTheInput) {
  // Rules on a saved output treat it as a constant the second time (see
  // autograd/functions/ElementwiseUnary.cpp), so those ops are left out.
  for (const OpCase& c : all_cases()) {
    if (!saves_input_or_nothing(c.op)) continue;
    Tensor x = testing::random_leaf({5}, 15).detach() * 2.0;
    if (has_nan(apply_unary(c.op, x, c.args))) x = x.abs() + 0.5;
    x.requires_grad_();
    // A piecewise-linear op's derivative does not depend on x (no history):
    // its second derivative is 0, which is what a tensor without history means.
    if (!first_derivative(c, x).requires_grad()) continue;
    EXPECT_TRUE(GradOk([&](const Inputs& in) { return first_derivative(c, in[0]); }, {x}))
        << c.spec;
  }
}

TEST(UnaryOps, DTypeRules) {
  const Tensor i = tensor<int64_t>({-2, 0, 3, 7});
  // Activations reject integers, as PyTorch's "not implemented for 'Long'".
  EXPECT_LOOM_ERROR(gelu(i), "gelu", "floating-point", "int64");
  EXPECT_LOOM_ERROR(silu(i), "silu", "floating-point");
  EXPECT_LOOM_ERROR(leaky_relu(i), "leaky_relu", "floating-point");
  // Transcendental ops compute integers as float32.
  EXPECT_EQ(erf(i).dtype(), kFloat32);
  EXPECT_EQ(log1p(i).dtype(), kFloat32);
  // neg/abs/relu/relu6 keep integers, reject bool.
  const Tensor r6 = relu6(i);
  EXPECT_EQ(r6.dtype(), kInt64);
  EXPECT_EQ(r6.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 3, 6}));
  EXPECT_LOOM_ERROR(relu6(tensor<bool>({true})), "relu6", "bool");
  EXPECT_LOOM_ERROR(-tensor<bool>({true}), "logical_not");
  // float32 stays float32.
  EXPECT_EQ(mish(tensor<float>({1, 2})).dtype(), kFloat32);
}

TEST(UnaryOps, InPlaceActivations) {
  Tensor x = tensor<double>({-2, -0.5, 0.5, 2});
  Tensor y = leaky_relu(x, 0.2, /*inplace=*/true);
  EXPECT_TRUE(y.is_same(x));
  EXPECT_TRUE(Matches(x, tensor<double>({-0.4, -0.1, 0.5, 2})));
  // Through autograd: in place on an intermediate equals out of place.
  Tensor a = tensor<double>({-2, -0.5, 0.5, 2}).requires_grad_();
  Tensor b = tensor<double>({-2, -0.5, 0.5, 2}).requires_grad_();
  for (auto* fn : {+[](const Tensor& t, bool inplace) { return hardswish(t, inplace); },
                   +[](const Tensor& t, bool inplace) { return elu(t, 1.0, inplace); },
                   +[](const Tensor& t, bool inplace) { return relu6(t, inplace); }}) {
    a.set_grad(Tensor());
    b.set_grad(Tensor());
    (fn(a * 3.0, true) * a).sum().backward();
    (fn(b * 3.0, false) * b).sum().backward();
    EXPECT_TRUE(Matches(a.grad(), b.grad()));
  }
  // A leaf that requires grad cannot be written in place.
  EXPECT_LOOM_ERROR(silu(a, true), "silu_", "leaf");
}

TEST(UnaryOps, Errors) {
  EXPECT_LOOM_ERROR(gelu(tensor<float>({1}), "exact"), "gelu", "none", "tanh", "exact");
  EXPECT_LOOM_ERROR(mish(Tensor()), "mish");
}

TEST(UnaryOps, GradFnNames) {
  Tensor x = tensor<double>({1, 2}).requires_grad_();
  EXPECT_EQ(leaky_relu(x).grad_fn()->name(), "LeakyReluBackward");
  EXPECT_EQ(gelu(x, "tanh").grad_fn()->name(), "GeluTanhBackward");
  EXPECT_EQ(x.relu().grad_fn()->name(), "ReluBackward");
}

}  // namespace
}  // namespace loom
