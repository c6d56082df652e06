// A tensor's gradient has its dtype.  As PyTorch's engine does, loom's
// converts a gradient a node returns in another dtype to the dtype of the
// tensor it belongs to (dropout's backward multiplied a 16-bit gradient by
// its float32 mask and handed float32 gradients to every op before it), and
// every differentiable op's float16/bfloat16 leaves get gradients of their
// own dtype.
#include <functional>
#include <memory>
#include <string>
#include <utility>
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
  for (DType d : {kFloat16, kBFloat16}) {
    auto leaf = [&](IntList sizes, uint64_t seed) {
      Generator gen(seed);
      return (randn(sizes, TensorOptions(kFloat32), &gen) * 0.5).to(d).requires_grad_();
    };
    const Tensor idx = tensor<int64_t>({1, 1, 4});
    using Case = std::function<std::pair<std::vector<Tensor>, Tensor>()>;
    const std::vector<std::pair<std::string, Case>> cases = {
        {"softmax", [&] { Tensor x = leaf({4, 5}, 1); return std::make_pair(std::vector<Tensor>{x}, softmax(x, 1)); }},
        {"log_softmax", [&] { Tensor x = leaf({4, 5}, 2); return std::make_pair(std::vector<Tensor>{x}, log_softmax(x, 0)); }},
        {"layer_norm", [&] {
           Tensor x = leaf({4, 5}, 3), w = leaf({5}, 4), b = leaf({5}, 5);
           return std::make_pair(std::vector<Tensor>{x, w, b}, layer_norm(x, {5}, w, b));
         }},
        {"group_norm", [&] {
           Tensor x = leaf({2, 4, 3}, 6), w = leaf({4}, 7), b = leaf({4}, 8);
           return std::make_pair(std::vector<Tensor>{x, w, b}, group_norm(x, 2, w, b));
         }},
        {"batch_norm", [&] {
           Tensor x = leaf({2, 3, 4, 4}, 9);
           return std::make_pair(std::vector<Tensor>{x},
                                 batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5));
         }},
        {"dropout", [&] { Tensor x = leaf({4, 5}, 10); return std::make_pair(std::vector<Tensor>{x}, dropout(x, 0.5, true)); }},
        {"embedding", [&] { Tensor w = leaf({6, 3}, 11); return std::make_pair(std::vector<Tensor>{w}, embedding(w, idx)); }},
        {"avg_pool2d", [&] { Tensor x = leaf({1, 2, 4, 4}, 12); return std::make_pair(std::vector<Tensor>{x}, avg_pool2d(x, {2})); }},
        {"adaptive_avg_pool2d", [&] { Tensor x = leaf({1, 2, 4, 4}, 13); return std::make_pair(std::vector<Tensor>{x}, adaptive_avg_pool2d(x, {1, 1})); }},
        {"max_pool2d", [&] { Tensor x = leaf({1, 2, 4, 4}, 14); return std::make_pair(std::vector<Tensor>{x}, max_pool2d(x, {2})); }},
        {"linear", [&] {
           Tensor x = leaf({4, 5}, 15), w = leaf({3, 5}, 16), b = leaf({3}, 17);
           return std::make_pair(std::vector<Tensor>{x, w, b}, linear(x, w, b));
         }},
        {"mm", [&] { Tensor a = leaf({4, 5}, 18), b = leaf({5, 3}, 19); return std::make_pair(std::vector<Tensor>{a, b}, mm(a, b)); }},
        {"bmm", [&] { Tensor a = leaf({2, 4, 5}, 20), b = leaf({2, 5, 3}, 21); return std::make_pair(std::vector<Tensor>{a, b}, bmm(a, b)); }},
        {"conv2d", [&] {
           Tensor x = leaf({1, 2, 5, 5}, 22), w = leaf({3, 2, 3, 3}, 23), b = leaf({3}, 24);
           return std::make_pair(std::vector<Tensor>{x, w, b}, conv2d(x, w, b));
         }},
        {"index_add", [&] {
           Tensor x = leaf({4, 3}, 25), s = leaf({2, 3}, 26);
           return std::make_pair(std::vector<Tensor>{x, s}, index_add(x, 0, tensor<int64_t>({1, 1}), s));
         }},
        {"scatter_add", [&] {
           Tensor x = leaf({4, 3}, 27), s = leaf({2, 3}, 28);
           return std::make_pair(std::vector<Tensor>{x, s}, scatter_add(x, 0, zeros({2, 3}, kInt64), s));
         }},
        {"gather", [&] { Tensor x = leaf({4, 3}, 29); return std::make_pair(std::vector<Tensor>{x}, gather(x, 0, zeros({2, 3}, kInt64))); }},
        {"cross_entropy", [&] {
           Tensor x = leaf({4, 5}, 30);
           return std::make_pair(std::vector<Tensor>{x}, cross_entropy(x, tensor<int64_t>({0, 1, 2, 3})));
         }},
        {"mse_loss", [&] {
           Tensor x = leaf({4, 5}, 31), t = leaf({4, 5}, 32);
           return std::make_pair(std::vector<Tensor>{x, t}, mse_loss(x, t));
         }},
    };
    for (const auto& [name, run] : cases) {
      SCOPED_TRACE(dtype_name(d) + " " + name);
      auto [leaves, out] = run();
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
