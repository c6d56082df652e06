// A tensor's gradient has its dtype.  As PyTorch's engine does, loom's
// converts a gradient a node returns in another dtype to the dtype of the
// tensor it belongs to (dropout's backward multiplied a 16-bit gradient by
// its float32 mask and handed float32 gradients to every op before it), and
// every differentiable op's float16/bfloat16 leaves get gradients of their
// own dtype.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/Node.h"
#include "autograd/functions/Record.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

// y = x; its backward hands back the incoming gradient widened to float32.
class WidensBackward final : public autograd::Node {
 public:
  std::string name() const override { return "WidensBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].to(kFloat32)};
  }
};

Tensor widens_in_backward(const Tensor& x) {
  Tensor y = x.detach().clone();
  autograd::record<WidensBackward>({x}, {y});
  return y;
}

TEST(HalfGradientDtype, TheEngineConvertsAGradientToItsTensorsDtype) {
  for (DType d : {kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor x = tensor<float>({0.5f, -1.25f, 3.0f}).to(d).requires_grad_();
    const Tensor y = widens_in_backward(x);  // its float32 gradient goes to the leaf as is
    (y * y).sum().backward();
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().dtype(), d);
    EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>({1.0, -2.5, 6.0}));  // 2x
  }
}

TEST(HalfGradientDtype, ConversionIsRecordedUnderCreateGraph) {
  const Tensor x = tensor<float>({0.5f, -1.5f}).to(kBFloat16).requires_grad_();
  const Tensor y = widens_in_backward(x);
  const Tensor gx = autograd::grad({(y * y).sum()}, {x}, {}, /*retain_graph=*/true,
                                   /*create_graph=*/true)[0];
  EXPECT_EQ(gx.dtype(), kBFloat16);
  EXPECT_TRUE(gx.requires_grad());
  gx.sum().backward();  // d/dx of sum(2x) = 2
  EXPECT_EQ(x.grad().dtype(), kBFloat16);
  EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>({2.0, 2.0}));
}

// Every differentiable op of a network on 16-bit leaves: the output and every
// leaf's gradient keep the leaf's dtype.
TEST(HalfGradientDtype, EveryOpGivesSixteenBitLeavesGradientsOfTheirDtype) {
  using Leaves = std::vector<Tensor>;
  struct Case {
    std::string name;
    std::vector<IntList> leaf_shapes;
    std::function<Tensor(const Leaves&)> op;
  };
  const Tensor idx = tensor<int64_t>({1, 1, 4});
  const Tensor two_rows = tensor<int64_t>({1, 1}), zeros23 = zeros({2, 3}, kInt64);
  const Tensor target = tensor<int64_t>({0, 1, 2, 3});
  const std::vector<Case> cases = {
      {"softmax", {{4, 5}}, [](const Leaves& v) { return softmax(v[0], 1); }},
      {"log_softmax", {{4, 5}}, [](const Leaves& v) { return log_softmax(v[0], 0); }},
      {"layer_norm", {{4, 5}, {5}, {5}},
       [](const Leaves& v) { return layer_norm(v[0], {5}, v[1], v[2]); }},
      {"group_norm", {{2, 4, 3}, {4}, {4}},
       [](const Leaves& v) { return group_norm(v[0], 2, v[1], v[2]); }},
      {"batch_norm", {{2, 3, 4, 4}, {3}, {3}},
       [](const Leaves& v) {
         return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true, 0.1, 1e-5);
       }},
      {"dropout", {{4, 5}}, [](const Leaves& v) { return dropout(v[0], 0.5, true); }},
      {"embedding", {{6, 3}}, [&](const Leaves& v) { return embedding(v[0], idx); }},
      {"avg_pool2d", {{1, 2, 4, 4}}, [](const Leaves& v) { return avg_pool2d(v[0], {2}); }},
      {"adaptive_avg_pool2d", {{1, 2, 4, 4}},
       [](const Leaves& v) { return adaptive_avg_pool2d(v[0], {1, 1}); }},
      {"max_pool2d", {{1, 2, 4, 4}}, [](const Leaves& v) { return max_pool2d(v[0], {2}); }},
      {"linear", {{4, 5}, {3, 5}, {3}}, [](const Leaves& v) { return linear(v[0], v[1], v[2]); }},
      {"mm", {{4, 5}, {5, 3}}, [](const Leaves& v) { return mm(v[0], v[1]); }},
      {"bmm", {{2, 4, 5}, {2, 5, 3}}, [](const Leaves& v) { return bmm(v[0], v[1]); }},
      {"conv2d", {{1, 2, 5, 5}, {3, 2, 3, 3}, {3}},
       [](const Leaves& v) { return conv2d(v[0], v[1], v[2]); }},
      {"index_add", {{4, 3}, {2, 3}},
       [&](const Leaves& v) { return index_add(v[0], 0, two_rows, v[1]); }},
      {"scatter_add", {{4, 3}, {2, 3}},
       [&](const Leaves& v) { return scatter_add(v[0], 0, zeros23, v[1]); }},
      {"gather", {{4, 3}}, [&](const Leaves& v) { return gather(v[0], 0, zeros23); }},
      {"cross_entropy", {{4, 5}}, [&](const Leaves& v) { return cross_entropy(v[0], target); }},
      {"mse_loss", {{4, 5}, {4, 5}}, [](const Leaves& v) { return mse_loss(v[0], v[1]); }},
  };
  for (DType d : {kFloat16, kBFloat16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(dtype_name(d) + " " + c.name);
      Leaves leaves;
      for (const IntList& shape : c.leaf_shapes) {
        Generator gen(leaves.size() + 1);
        leaves.push_back((randn(shape, TensorOptions(kFloat32), &gen) * 0.5).to(d).requires_grad_());
      }
      const Tensor out = c.op(leaves);
      EXPECT_EQ(out.dtype(), d);
      out.backward(ones_like(out));
      for (size_t i = 0; i < leaves.size(); ++i) {
        ASSERT_TRUE(leaves[i].grad().defined()) << "leaf " << i;
        EXPECT_EQ(leaves[i].grad().dtype(), d) << "leaf " << i;
        EXPECT_EQ(leaves[i].grad().sizes(), leaves[i].sizes()) << "leaf " << i;
      }
    }
  }
}

}  // namespace
}  // namespace loom
