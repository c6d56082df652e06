// The multi-device contract model parallelism relies on: `.to(device)` between
// CPU logical devices is differentiable, `module->to(device)` moves every
// parameter and buffer, and an op whose inputs sit on two devices fails with
// a message naming both.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;

const Device kCpu0("cpu");
const Device kCpu1("cpu:1");

TEST(MultiDeviceContract, ToOtherDeviceIsDifferentiable) {
  Tensor x = random_leaf({3, 4}, 1);
  Tensor y = random_leaf({3, 4}, 2);
  // Out and back: the gradient crosses twice.
  EXPECT_TRUE(GradOk(
      [&](const std::vector<Tensor>& in) {
        Tensor a = in[0].to(kCpu1);
        Tensor b = in[1].to(kCpu1);
        return (a * b).tanh().to(kCpu0);
      },
      {x, y}));
  // Output left on cpu:1.
  EXPECT_TRUE(GradOk(
      [&](const std::vector<Tensor>& in) { return (in[0].to(kCpu1) * 3.0).tanh(); }, {x}));
  // A chain over three devices, each stage a matmul.
  Tensor w = random_leaf({4, 4}, 3);
  EXPECT_TRUE(GradOk(
      [&](const std::vector<Tensor>& in) {
        Tensor h = matmul(in[0], in[1]).relu();                 // cpu:0
        h = matmul(h.to(kCpu1), in[1].to(kCpu1)).sigmoid();     // cpu:1
        return matmul(h.to(Device("cpu:2")), in[1].to(Device("cpu:2")));  // cpu:2
      },
      {x, w}));
}

TEST(MultiDeviceContract, BackwardOfToPutsTheGradientOnTheSourceDevice) {
  Tensor x = random_leaf({5}, 4);
  Tensor y = x.to(kCpu1);
  EXPECT_EQ(y.device(), kCpu1);
  EXPECT_TRUE(y.requires_grad());
  (y * y).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), kCpu0);
  EXPECT_TRUE(AllClose(x.grad(), x.detach() * 2.0));
  // Leaves created on cpu:1 get their gradient on cpu:1.
  Tensor z = random_leaf({5}, 5).to(kCpu1).detach().requires_grad_();
  (z.to(kCpu0) * 4.0).sum().backward();
  EXPECT_EQ(z.grad().device(), kCpu1);
  EXPECT_TRUE(AllClose(z.grad().to(kCpu0), full({5}, 4.0, kFloat64)));
}

TEST(MultiDeviceContract, ModuleToMovesParametersAndBuffersInPlace) {
  nn::Sequential net(nn::Conv2d(2, 3, 3), nn::BatchNorm2d(3), nn::ReLU(), nn::Flatten(),
                     nn::Linear(3 * 2 * 2, 2));
  Tensor input = randn({2, 2, 4, 4});
  // Detached: a graph kept alive across module->to() would still point at
  // the parameters' old gradient accumulators (cached, holding the old
  // device); see the report of issue 6.
  Tensor expected = net->forward(input).detach();
  auto linear = net->at<nn::LinearImpl>(4);
  Tensor weight_handle = linear->weight;  // a handle taken before the move
  net->to(kCpu1);
  for (const auto& [name, p] : net->named_parameters())
    EXPECT_EQ(p.device(), kCpu1) << name;
  for (const auto& [name, b] : net->state_dict())
    EXPECT_EQ(b.device(), kCpu1) << name;
  EXPECT_EQ(linear->weight.device(), kCpu1);
  EXPECT_EQ(weight_handle.device(), kCpu1) << "handles held by the user stay valid";
  EXPECT_TRUE(linear->weight.requires_grad());
  // Same results on the new device (batch-norm in training mode both times:
  // its running statistics moved along and were updated once more).
  Tensor out = net->forward(input.to(kCpu1));
  EXPECT_EQ(out.device(), kCpu1);
  EXPECT_TRUE(AllClose(out.to(kCpu0), expected, 1e-5, 1e-6));
  out.sum().to(kCpu0).backward();
  for (const auto& [name, p] : net->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().device(), kCpu1) << name;
  }
  // The tutorial's most common error: input left on the old device.
  EXPECT_LOOM_ERROR(net->forward(input), "cpu", "cpu:1");
}

TEST(MultiDeviceContract, MixedDeviceInputsNameBothDevices) {
  Tensor a = ones({2, 3});
  Tensor b = ones({2, 3}, TensorOptions().device(kCpu1));
  Tensor w = ones({3, 3}, TensorOptions().device(kCpu1));
  EXPECT_LOOM_ERROR(a + b, "cpu", "cpu:1", "same device");
  EXPECT_LOOM_ERROR(a * b, "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(matmul(a, w), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(linear(a, w), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(cat({a, b}), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(mse_loss(a, b), "cpu", "cpu:1");
  Tensor img = ones({1, 1, 4, 4});
  Tensor kernel = ones({1, 1, 3, 3}, TensorOptions().device(kCpu1));
  EXPECT_LOOM_ERROR(conv2d(img, kernel), "cpu", "cpu:1");
  // Every other op with two or more tensor inputs.
  Tensor idx0 = zeros({2}, kInt64);
  Tensor idx1 = zeros({2}, TensorOptions(kInt64).device(kCpu1));
  Tensor square1 = ones({3, 3}, TensorOptions().device(kCpu1));
  Tensor square0 = ones({3, 3});
  EXPECT_LOOM_ERROR(a - b, "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(a / b, "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(pow(a, b), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(maximum(a, b), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(minimum(a, b), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(where(a.gt(0.0), a, b), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(where(b.gt(0.0), a, a), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(a.lt(b), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(mm(square0, square1), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(bmm(ones({1, 3, 3}), ones({1, 3, 3}, TensorOptions().device(kCpu1))),
                    "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(linear(ones({2, 3}), square0, ones({3}, TensorOptions().device(kCpu1))),
                    "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(stack({a, b}), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(index_select(square0, 0, idx1), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(index_add(square0, 0, idx0, ones({2, 3}, TensorOptions().device(kCpu1))),
                    "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(gather(square0, 0, zeros({3, 3}, TensorOptions(kInt64).device(kCpu1))),
                    "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(
      scatter_add(square0, 0, zeros({3, 3}, kInt64), ones({3, 3}, TensorOptions().device(kCpu1))),
      "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(cross_entropy(ones({2, 3}), idx1), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(nll_loss(ones({2, 3}), idx1), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(embedding(square1, idx0), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(batch_norm(ones({2, 3}), Tensor(), Tensor(),
                               ones({3}, TensorOptions().device(kCpu1)), Tensor(), true),
                    "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(batch_norm(ones({2, 3}), zeros({3}, TensorOptions().device(kCpu1)),
                               ones({3}), Tensor(), Tensor(), true),
                    "cpu", "cpu:1");
  Tensor leaf = ones({2, 3});
  EXPECT_LOOM_ERROR(leaf.add_(b), "cpu", "cpu:1");
  EXPECT_LOOM_ERROR(leaf.mul_(b), "cpu", "cpu:1");
  // copy_ is the in-place way across devices: allowed.
  leaf.copy_(b * 2.0f);
  EXPECT_EQ(leaf.device(), kCpu0);
  EXPECT_TRUE(AllClose(leaf, full({2, 3}, 2.0f)));
  // Two non-default devices, both named.
  Tensor c = ones({2, 3}, TensorOptions().device(Device("cpu:2")));
  EXPECT_LOOM_ERROR(b - c, "cpu:1", "cpu:2");
}

}  // namespace
}  // namespace loom
