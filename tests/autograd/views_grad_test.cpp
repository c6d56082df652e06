// Gradchecks for every differentiable view and copy, on contiguous and
// non-contiguous (transposed, sliced) inputs, plus copy_'s and to()'s
// gradients across dtypes and logical CPU devices.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;
using Inputs = std::vector<Tensor>;

// A transposed (non-contiguous) input of shape [cols, rows].
Tensor transposed(int64_t rows, int64_t cols, uint64_t seed) {
  return random_leaf({rows, cols}, seed).t();
}

TEST(ViewsGrad, ViewReshapeFlattenSqueezeUnsqueeze) {
  Tensor x = random_leaf({2, 3, 4}, 1);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].view({6, 4}); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].reshape({4, -1}); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].flatten(1); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].unsqueeze(1).unsqueeze(-1); }, {x}));
  Tensor y = random_leaf({3, 1, 2, 1}, 2);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].squeeze(); }, {y}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].squeeze(1) * 2.0; }, {y}));
  // reshape of a non-viewable input copies, and still differentiates.
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].reshape({6}); }, {transposed(2, 3, 3)}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].flatten(); }, {transposed(3, 2, 4)}));
}

TEST(ViewsGrad, PermuteTransposeT) {
  Tensor x = random_leaf({2, 3, 4}, 5);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].permute({2, 0, 1}); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].permute({-1, 1, 0}) * 3.0; }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].transpose(0, 2); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].t() * in[0].t(); }, {transposed(3, 2, 6)}));
  Tensor v = random_leaf({4}, 7);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].t() * 2.0; }, {v}));
}

TEST(ViewsGrad, NarrowSelectSlice) {
  Tensor x = random_leaf({4, 5}, 8);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].narrow(0, 1, 2); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].narrow(-1, -3, 3) * 2.0; }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].select(1, 3); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].select(0, -1) * in[0].select(0, 0); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].slice(1, 0, 5, 2); }, {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].slice(0, -3, 100, 2); }, {x}));
  // Non-contiguous inputs: transposed and sliced.
  Tensor t = transposed(4, 3, 9);  // [3, 4]
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].narrow(1, 1, 2); }, {t}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].select(1, 2); }, {t}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].slice(1, 1, 4, 2); }, {t}));
  Tensor sliced = random_leaf({6, 4}, 10).slice(0, 0, 6, 2);  // [3, 4], row stride 8
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].select(0, 1) * in[0].select(0, 2); },
                     {sliced}));
}

TEST(ViewsGrad, ExpandAndAsStrided) {
  Tensor x = random_leaf({3, 1}, 11);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].expand({2, 3, 4}); }, {x}));
  Tensor s = random_leaf({9}, 12);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].as_strided({2, 2}, {3, 1}, 1); }, {s}));
  // Overlapping windows: each storage element's gradient sums over its uses.
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].as_strided({3, 3}, {1, 1}, 0); }, {s}));
  // Non-contiguous input: its storage offsets are absolute.
  Tensor t = transposed(2, 3, 13);  // [3, 2], strides [1, 3]
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].as_strided({2, 2}, {3, 1}, 1); }, {t}));
}

TEST(ViewsGrad, SplitChunkUnbind) {
  Tensor x = random_leaf({3, 5}, 14);
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        auto p = in[0].split(2, 1);  // widths 2, 2, 1
        return p[0] * p[1] + p[2] * 3.0;
      },
      {x}));
  // Only one piece used: the others' gradients are zero-filled.
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].split_with_sizes({1, 4}, 1)[1]; }, {x}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        auto c = in[0].chunk(2, 0);  // rows 2 and 1
        return c[0].sum(IntList{0}) * c[1];
      },
      {x}));
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        auto cols = in[0].unbind(1);
        return cols[0] * cols[4] + cols[2];
      },
      {x}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].unbind(0)[1]; }, {transposed(4, 3, 15)}));
  auto pieces = x.split(2, 1);
  EXPECT_EQ(pieces[0].grad_fn()->name(), "SplitBackward");
  EXPECT_EQ(pieces[2].output_nr(), 2u);
}

TEST(ViewsGrad, CloneContiguousTo) {
  Tensor t = transposed(3, 4, 16);
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].contiguous() * 2.0; }, {t}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].clone() * in[0]; }, {t}));
  EXPECT_TRUE(GradOk([](const Inputs& in) { return in[0].to(kFloat32).to(kFloat64); }, {t},
                     {1e-3, 1e-3, 1e-2}));
}

TEST(ViewsGrad, ToAnotherLogicalDeviceIsDifferentiable) {
  Tensor x = random_leaf({2, 3}, 17);
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        Tensor y = in[0].to(Device("cpu:1"));
        EXPECT_EQ(y.device(), Device("cpu:1"));
        return (y * y).to(Device("cpu"));
      },
      {x}));
  Tensor z = (x.to("cpu:1") * 3.0).sum();
  z.backward();
  EXPECT_EQ(x.grad().device(), Device("cpu"));
  EXPECT_TRUE(AllClose(x.grad(), full({2, 3}, 3.0, kFloat64)));
}

TEST(CopyGrad, GradientFlowsToSrcNotToOverwrittenValues) {
  Tensor x = random_leaf({2, 3}, 18);
  Tensor y = random_leaf({3}, 19);  // broadcast over self's rows
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        Tensor z = in[0] * 2.0;
        z.copy_(in[1]);
        return z * in[0];
      },
      {x, y}));
  // Into a buffer without history, from a non-contiguous source.
  EXPECT_TRUE(GradOk(
      [](const Inputs& in) {
        Tensor buf = zeros({3, 2}, kFloat64);
        buf.copy_(in[0]);
        return buf * buf;
      },
      {transposed(2, 3, 20)}));
}

TEST(CopyGrad, ConvertsGradientToSrcDtypeAndDevice) {
  Tensor src = random_leaf({2, 2}, 21);  // float64 on cpu
  Tensor dst = zeros({2, 2}, TensorOptions(kFloat32).device(Device("cpu:1")));
  dst.copy_(src);
  EXPECT_EQ(dst.grad_fn()->name(), "CopyBackward");
  (dst * 2.0f).sum().backward();
  ASSERT_TRUE(src.grad().defined());
  EXPECT_EQ(src.grad().dtype(), kFloat64);
  EXPECT_EQ(src.grad().device(), Device("cpu"));
  EXPECT_TRUE(AllClose(src.grad(), full({2, 2}, 2.0, kFloat64)));
}

TEST(CopyGrad, InplaceChecks) {
  Tensor leaf = random_leaf({2}, 22);
  EXPECT_LOOM_ERROR(leaf.copy_(zeros({2}, kFloat64)), "copy_", "leaf", "in-place");
  Tensor view_of_leaf = leaf.narrow(0, 0, 1);
  EXPECT_LOOM_ERROR(view_of_leaf.copy_(zeros({1}, kFloat64)), "copy_", "view");
  // Without grad mode it is a plain copy.
  {
    NoGradGuard no_grad;
    leaf.copy_(full({2}, 5.0, kFloat64));
  }
  EXPECT_EQ(leaf.to_vector<double>(), (std::vector<double>{5, 5}));
  EXPECT_TRUE(leaf.is_leaf());
}

TEST(ViewsGrad, DoubleBackwardThroughViews) {
  Tensor x = random_leaf({4, 3}, 23);
  Tensor part = x.narrow(0, 1, 2).t().select(0, 1);  // x[1:3, 1]
  Tensor y = (part * part * part).sum();
  auto g = autograd::grad({y}, {x}, {}, true, true);
  // dy/dx = 3 x^2 on the selected entries; d(sum dy/dx)/dx = 6 x there.
  g[0].sum().backward();
  Tensor expected = zeros({4, 3}, kFloat64);
  const auto xv = x.to_vector<double>();
  for (int r = 1; r < 3; ++r) {
    NoGradGuard no_grad;
    expected.select(0, r).select(0, 1).copy_(scalar_tensor(6 * xv[r * 3 + 1], kFloat64));
  }
  EXPECT_TRUE(AllClose(x.grad(), expected));
}

}  // namespace
}  // namespace loom
