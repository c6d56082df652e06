// Gradchecks for index_select, index_add, gather and scatter_add, with
// repeated indices and non-contiguous inputs, and second-order gradients.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

Tensor idx(std::vector<int64_t> v, IntList sizes = {}) { return tensor<int64_t>(v, sizes); }

TEST(IndexGrad, IndexSelect) {
  Tensor x = random_leaf({4, 3}, 1);
  const Tensor rows = idx({3, 0, 3});  // repeated: gradients accumulate
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return in[0].index_select(0, rows); }, {x}));
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return index_select(in[0], -1, idx({2, 2})); }, {x}));
  Tensor t = random_leaf({3, 4}, 2).t();  // [4, 3], non-contiguous
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return in[0].index_select(1, idx({1, 0})); }, {t}));
  // The rule itself: index_add of the gradient into zeros.
  Tensor y = x.index_select(0, rows);
  EXPECT_EQ(y.grad_fn()->name(), "IndexSelectBackward");
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(),
            (std::vector<double>{1, 1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 2}));
}

TEST(IndexGrad, IndexAdd) {
  Tensor self = random_leaf({3, 2}, 3);
  Tensor src = random_leaf({4, 2}, 4);
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) { return index_add(in[0], 0, idx({2, 0, 2, 1}), in[1]); },
      {self, src}));
  Tensor src_t = random_leaf({2, 3}, 5).t();  // [3, 2]
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) { return index_add(in[0] * in[0], 1, idx({1, 1}), in[1]); },
      {src_t, random_leaf({3, 2}, 6)}));
}

TEST(IndexGrad, Gather) {
  Tensor x = random_leaf({3, 4}, 7);
  const Tensor i1 = idx({3, 3, 0, 1, 2, 1}, {3, 2});
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return in[0].gather(1, i1); }, {x}));
  const Tensor i0 = idx({2, 0, 1, 2}, {1, 4});
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return gather(in[0], 0, i0) * 3.0; }, {x}));
  Tensor t = random_leaf({4, 3}, 8).t();  // [3, 4], non-contiguous
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return in[0].gather(1, i1); }, {t}));
}

TEST(IndexGrad, ScatterAdd) {
  Tensor self = random_leaf({2, 3}, 9);
  Tensor src = random_leaf({2, 3}, 10);
  const Tensor i = idx({0, 0, 2, 1, 1, 1}, {2, 3});
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return in[0].scatter_add(1, i, in[1]); },
                     {self, src}));
  // src larger than index: its unused entries get zero gradient.
  Tensor big = random_leaf({3, 4}, 11);
  const Tensor i0 = idx({1, 0, 1}, {1, 3});
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return scatter_add(in[0], 0, i0, in[1]); },
                     {self, big}));
  Tensor src_t = random_leaf({3, 2}, 12).t();  // [2, 3], non-contiguous
  EXPECT_TRUE(GradOk([&](const Inputs& in) { return scatter_add(in[0], 1, i, in[1]) * in[0]; },
                     {self, src_t}));
  Tensor y = scatter_add(self, 0, i0, big);
  y.sum().backward();
  EXPECT_TRUE(AllClose(self.grad(), ones({2, 3}, kFloat64)));
  EXPECT_EQ(big.grad().to_vector<double>(),
            (std::vector<double>{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(IndexGrad, SecondOrderThroughGatherAndIndexSelect) {
  // f = sum(gather(x)^3): d2f/dx2 summed = 6 x at picked entries (times multiplicity).
  Tensor x = random_leaf({2, 3}, 13);
  const Tensor i = idx({2, 2, 0, 1}, {2, 2});
  Tensor g = x.gather(1, i);
  auto first = autograd::grad({(g * g * g).sum()}, {x}, {}, true, true);
  first[0].sum().backward();
  const auto xv = x.to_vector<double>();
  std::vector<double> expected(6, 0);
  expected[2] = 2 * 6 * xv[2];  // x[0][2] picked twice
  expected[3] = 6 * xv[3];
  expected[4] = 6 * xv[4];
  EXPECT_TRUE(AllClose(x.grad(), tensor<double>(expected, {2, 3})));

  Tensor z = random_leaf({3}, 14);
  Tensor s = z.index_select(0, idx({1, 1}));
  auto gz = autograd::grad({(s * s).sum()}, {z}, {}, true, true);
  gz[0].sum().backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0, 4, 0}));
}

}  // namespace
}  // namespace loom
