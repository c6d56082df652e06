// nn::Sequential runs a BatchNorm1d/2d followed by a ReLU as one fused
// batch_norm_relu: the same outputs, running statistics and gradients, bit
// for bit, as the children run one at a time; no separate ReLU kernel; a
// subclass with its own forward (SyncBatchNorm's shape) is not bypassed; an
// error still names the child.
#include "tests/TestUtil.h"
#include "tensor/native/KernelProfile.h"

namespace loom {
namespace {

using testing::AllClose;

// The children of seq, one after the other (no fusion).
Tensor run_children(const nn::SequentialImpl& seq, const Tensor& x) {
  Tensor out = x;
  for (size_t i = 0; i < seq.size(); ++i) out = seq[static_cast<int64_t>(i)]->forward(out);
  return out;
}

// Forward (training, then eval) and backward through `fused` and a clone run
// child by child: equal bits everywhere.
void expect_same_as_children(nn::Sequential fused, const Tensor& input) {
  auto plain = std::dynamic_pointer_cast<nn::SequentialImpl>(fused->clone());
  ASSERT_TRUE(plain);
  for (bool training : {true, false}) {
    fused->train(training);
    plain->train(training);
    const Tensor x1 = input.clone().requires_grad_();
    const Tensor x2 = input.clone().requires_grad_();
    const Tensor y1 = fused->forward(x1);
    const Tensor y2 = run_children(*plain, x2);
    ASSERT_EQ(y1.sizes(), y2.sizes());
    EXPECT_TRUE(AllClose(y1, y2, 0, 0)) << "training " << training;
    const Tensor g = randn(y1.sizes());
    (y1 * g).sum().backward();
    (y2 * g).sum().backward();
    EXPECT_TRUE(AllClose(x1.grad(), x2.grad(), 0, 0)) << "training " << training;
    const auto p1 = fused->named_parameters(), p2 = plain->named_parameters();
    for (const auto& key : p1.keys()) {
      ASSERT_TRUE(p1.at(key).grad().defined()) << key;
      EXPECT_TRUE(AllClose(p1.at(key).grad(), p2.at(key).grad(), 0, 0)) << key;
    }
    const auto b1 = fused->named_buffers(), b2 = plain->named_buffers();
    for (const auto& key : b1.keys()) EXPECT_TRUE(AllClose(b1.at(key), b2.at(key), 0, 0)) << key;
  }
}

TEST(SequentialFusion, BatchNorm2dReluMatchesTheChildrenOneByOne) {
  manual_seed(5);
  expect_same_as_children(nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)),
                                         nn::BatchNorm2d(4), nn::ReLU(),
                                         nn::MaxPool2d(nn::MaxPool2dOptions(2))),
                          randn({6, 3, 8, 8}));
}

TEST(SequentialFusion, BatchNorm1dAndInplaceReluMatchTheChildren) {
  manual_seed(6);
  expect_same_as_children(
      nn::Sequential(nn::Linear(5, 7), nn::BatchNorm1d(7), nn::ReLU(true), nn::Linear(7, 2)),
      randn({9, 5}));
}

TEST(SequentialFusion, NoSeparateReluKernelRuns) {
  manual_seed(7);
  nn::Sequential seq(nn::BatchNorm2d(3), nn::ReLU());
  const Tensor x = randn({4, 3, 5, 5});
  native::start_kernel_profile();
  seq->forward(x);
  const auto stats = native::stop_kernel_profile();
  bool batch_norm = false;
  for (const auto& s : stats) {
    EXPECT_NE(s.name, "unary") << "a separate ReLU ran";
    batch_norm = batch_norm || s.name == "batch_norm";
  }
  EXPECT_TRUE(batch_norm);
}

// A batch norm subclass with its own forward (as SyncBatchNorm has) runs
// that forward, and the ReLU after it.
struct CountingBatchNorm : nn::BatchNorm2dImpl {
  explicit CountingBatchNorm(int64_t c) : nn::BatchNorm2dImpl(nn::BatchNormOptions(c)) {}
  Tensor forward(const Tensor& input) override {
    ++calls;
    return nn::BatchNorm2dImpl::forward(input) - 1.0;
  }
  int calls = 0;
};

TEST(SequentialFusion, SubclassWithItsOwnForwardIsNotBypassed) {
  auto bn = std::make_shared<CountingBatchNorm>(2);
  nn::Sequential seq;
  seq->push_back(bn);
  seq->push_back(nn::ReLU());
  const Tensor y = seq->forward(randn({3, 2, 4, 4}));
  EXPECT_EQ(bn->calls, 1);
  EXPECT_GE(y.min().item<float>(), 0.0f);
}

TEST(SequentialFusion, ErrorNamesTheBatchNormChild) {
  nn::Sequential seq(nn::BatchNorm2d(3), nn::ReLU());
  EXPECT_LOOM_ERROR(seq->forward(randn({2, 4, 5, 5})), "Sequential: in child (0) BatchNorm2d",
                    "C = 3");
}

}  // namespace
}  // namespace loom
