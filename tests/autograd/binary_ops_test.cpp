// Every op of the binary table (tensor/native/BinaryOps.h), walked from the
// table itself: forward and both gradients against PyTorch 1.13 (float64,
// broadcasting, ties, zeros and nan), and gradchecks of the arithmetic ops.
// An op added to the table is tested here once its PyTorch counterpart is in
// tools/pyloom/binary_ops.py's REFERENCE.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/native/Binary.h"
#include "tests/PythonRef.h"

namespace loom {
namespace {

using native::BinaryOp;
using testing::GradOk;
using Inputs = std::vector<Tensor>;

std::vector<BinaryOp> all_ops() {
  std::vector<BinaryOp> out;
  optable::for_each_op(optable::BinaryOpList{}, [&](auto tag) {
    out.push_back(native::binary_op<typename decltype(tag)::type>());
  });
  return out;
}

// Elementwise equal within tolerance, nan matching nan; shapes first.
::testing::AssertionResult Matches(const Tensor& actual, const Tensor& expected) {
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << actual.describe() << " vs expected "
                                         << expected.describe();
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    if (!both_nan && a[i] != e[i] && !(std::abs(a[i] - e[i]) <= 1e-12 + 1e-10 * std::abs(e[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected "
                                           << e[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(BinaryOps, ForwardAndGradientsMatchPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // a (4, 5) against b (5): ties, zeros (pow's 0 ** b), negatives, a nan.
  Generator gen(21);
  Tensor a = randn({4, 5}, kFloat64, &gen);
  std::vector<double> av = a.to_vector<double>();
  av[0] = 0;      // 0 ** b
  av[1] = 2;      // a tie with b[1]
  av[7] = nan;    // nan wins maximum/minimum
  av[13] = -1.5;  // negative base
  a = tensor<double>(av, {4, 5});
  const Tensor b = tensor<double>({2, 2, -0.5, 3, 0.25});
  const Tensor g = randn({4, 5}, kFloat64, &gen);
  const std::string dir = testing::make_temp_dir();
  nn::StateDict in;
  in.insert("a", a);
  in.insert("b", b);
  in.insert("grad", g);
  nn::save(in, dir + "/in.safetensors");
  std::string names, output;
  for (BinaryOp op : all_ops()) names += std::string(" ") + native::binary_op_name(op);
  const int rc = testing::run_python(
      "binary_ops.py", dir + "/in.safetensors " + dir + "/out.safetensors" + names, output);
  ASSERT_EQ(rc, 0) << "PyTorch reference failed:\n" << output;
  const nn::StateDict ref = nn::load(dir + "/out.safetensors");
  for (BinaryOp op : all_ops()) {
    const std::string name = native::binary_op_name(op);
    Tensor x = a.detach().requires_grad_(), y = b.detach().requires_grad_();
    if (native::is_comparison(op)) {
      EXPECT_TRUE(Matches(native::binary(op, x, y), ref.at(name + ".out"))) << name;
      continue;
    }
    Tensor out;
    // The differentiable functions, as users call them.
    if (name == "add") out = x + y;
    if (name == "sub") out = x - y;
    if (name == "mul") out = x * y;
    if (name == "div") out = x / y;
    if (name == "pow") out = x.pow(y);
    if (name == "maximum") out = maximum(x, y);
    if (name == "minimum") out = minimum(x, y);
    ASSERT_TRUE(out.defined()) << name << ": no loom function is mapped in this test";
    EXPECT_TRUE(Matches(out, ref.at(name + ".out"))) << name;
    const auto grads = autograd::grad({out}, {x, y}, {g});
    EXPECT_TRUE(Matches(grads[0], ref.at(name + ".grad_a"))) << name << " grad a";
    EXPECT_TRUE(Matches(grads[1], ref.at(name + ".grad_b"))) << name << " grad b";
  }
}

TEST(BinaryOps, GradcheckWithBroadcasting) {
  Tensor a = testing::random_leaf({3, 4}, 22), b = testing::random_leaf({4}, 23);
  Tensor pos = (testing::random_leaf({3, 4}, 24).detach() * 0.5 + 1.0).requires_grad_();
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].add(x[1], 0.5); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].sub(x[1], 2); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0] * x[1]; }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[1] / (x[0] + 3.0); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return x[0].pow(x[1]); }, {pos, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return maximum(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(GradOk([](const Inputs& x) { return minimum(x[0], x[1]); }, {a, b}));
}

TEST(BinaryOps, NamesAndKinds) {
  EXPECT_EQ(all_ops().size(), 13u);
  EXPECT_STREQ(native::binary_op_name(native::binary_op<optable::Maximum>()), "maximum");
  EXPECT_TRUE(native::is_comparison(native::binary_op<optable::Ge>()));
  EXPECT_FALSE(native::is_comparison(native::binary_op<optable::Pow>()));
  Tensor x = tensor<double>({1, 2}).requires_grad_();
  EXPECT_EQ((x * x).grad_fn()->name(), "MulBackward");
  EXPECT_EQ(maximum(x, x).grad_fn()->name(), "MaximumBackward");
  EXPECT_EQ((tensor<int64_t>({1}) / tensor<int64_t>({2})).dtype(), kFloat32);
  EXPECT_LOOM_ERROR(tensor<bool>({true}) + tensor<bool>({true}), "add", "bool");
}

}  // namespace
}  // namespace loom
