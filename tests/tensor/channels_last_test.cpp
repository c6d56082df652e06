// Channels-last (NHWC) tensors: the memory format API, elementwise results
// keeping their input's layout, and the CPU kernels that take channels-last
// operands as they are (batch norm, max pooling, oneDNN convolutions): the
// same values as on NCHW copies, the layout kept in the results.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tensor/MemoryFormat.h"
#include "tensor/cpu/OneDnnConvolution.h"
#include "tensor/native/Convolution.h"
#include "tensor/native/Normalization.h"
#include "tensor/native/Pooling.h"
#include "tensor/native/Unary.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;
using testing::random_leaf;

constexpr MemoryFormat kCL = MemoryFormat::kChannelsLast;
constexpr native::UnaryOp kRelu = native::unary_op<optable::Relu>();

// Equal values, NaN equal to NaN.
::testing::AssertionResult SameValues(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

// Channels last and not also contiguous (the layout is visible).
bool is_channels_last(const Tensor& t) { return t.suggest_memory_format() == kCL; }

Tensor random(IntList sizes, uint64_t seed, DType dtype = kFloat32) {
  Generator gen(seed + 1);
  return randn(std::move(sizes), kFloat32, &gen).to(dtype);
}

TEST(ChannelsLast, StridesAndDensity) {
  EXPECT_EQ(strides_for({2, 3, 4, 5}, kCL), (IntList{60, 1, 15, 3}));
  EXPECT_EQ(strides_for({2, 3, 4, 5}, MemoryFormat::kContiguous), (IntList{60, 20, 5, 1}));
  EXPECT_TRUE(is_dense_in({2, 3, 4, 5}, {60, 1, 15, 3}, kCL));
  EXPECT_FALSE(is_dense_in({2, 3, 4, 5}, {60, 20, 5, 1}, kCL));
  // Size-1 dims may have any stride: one channel is both layouts.
  EXPECT_TRUE(is_dense_in({2, 1, 4, 5}, {20, 20, 5, 1}, kCL));
  EXPECT_FALSE(is_dense_in({2, 3, 4}, {12, 4, 1}, kCL));
  EXPECT_LOOM_ERROR(strides_for({3, 4, 5}, kCL), "channels_last", "4-D", "[3, 4, 5]");
  EXPECT_STREQ(memory_format_name(kCL), "channels_last");
}

TEST(ChannelsLast, EmptyContiguousAndBack) {
  const Tensor e = empty({2, 3, 4, 5}, kFloat32, kCL);
  EXPECT_EQ(e.strides(), (IntList{60, 1, 15, 3}));
  EXPECT_TRUE(is_channels_last(e));
  const Tensor x = random({2, 3, 4, 5}, 1);
  const Tensor cl = x.contiguous(kCL);
  EXPECT_TRUE(is_channels_last(cl));
  EXPECT_TRUE(AllClose(cl, x, 0, 0));
  EXPECT_TRUE(cl.contiguous(kCL).is_same(cl));  // already so: itself
  const Tensor back = cl.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_TRUE(AllClose(back, x, 0, 0));
  // The same tensor as an NHWC buffer permuted to (N, C, H, W).
  const Tensor nhwc = x.permute({0, 2, 3, 1}).contiguous();
  EXPECT_TRUE(AllClose(nhwc.permute({0, 3, 1, 2}), cl, 0, 0));
  EXPECT_TRUE(is_channels_last(nhwc.permute({0, 3, 1, 2})));
  EXPECT_LOOM_ERROR(random({3, 4, 5}, 2).contiguous(kCL), "channels_last", "4-D");
}

TEST(ChannelsLast, ContiguousIsDifferentiable) {
  EXPECT_TRUE(GradOk([](const std::vector<Tensor>& x) { return x[0].contiguous(kCL) * x[1]; },
                     {random_leaf({2, 3, 2, 2}, 3), random_leaf({2, 3, 2, 2}, 4)}));
}

// Elementwise results are laid out as their first operand of the full shape.
TEST(ChannelsLast, ElementwiseResultsKeepTheLayout) {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor a = random({2, 5, 3, 4}, 5, dtype), b = random({2, 5, 3, 4}, 6, dtype);
    const Tensor acl = a.contiguous(kCL), bcl = b.contiguous(kCL);
    const Tensor sum = acl + bcl;
    EXPECT_TRUE(is_channels_last(sum)) << dtype_name(dtype);
    EXPECT_TRUE(AllClose(sum, a + b, 0, 0)) << dtype_name(dtype);
    // Mixed layouts: the first operand's; values the same.
    EXPECT_TRUE(is_channels_last(acl * b));
    EXPECT_TRUE((a * bcl).is_contiguous());
    EXPECT_TRUE(AllClose(acl * b, a * b, 0, 0));
    EXPECT_TRUE(AllClose(a * bcl, a * b, 0, 0));
    // A broadcast operand first: the full-shape one's layout.
    const Tensor bias = random({1, 5, 1, 1}, 7, dtype);
    EXPECT_TRUE(is_channels_last(bias + acl));
    EXPECT_TRUE(AllClose(bias + acl, bias + a, 0, 0));
    // Unary ops, scalars, and the backward kernels (ReLU's).
    EXPECT_TRUE(is_channels_last(acl.relu()));
    EXPECT_TRUE(AllClose(acl.relu(), a.relu(), 0, 0));
    EXPECT_TRUE(is_channels_last(acl * 2.0));
    const Tensor grad = native::unary_backward(kRelu, bcl, acl.relu(), {});
    EXPECT_TRUE(is_channels_last(grad));
    EXPECT_TRUE(AllClose(grad, native::unary_backward(kRelu, b, a.relu(), {}),
                         0, 0));
    // In place on a channels-last tensor, with an NCHW operand.
    Tensor c = empty(a.sizes(), dtype, kCL);
    c.copy_(a);
    // Conversions keep the layout too (PyTorch's preserve_format).
    EXPECT_TRUE(is_channels_last(c.to(kFloat64)));
    EXPECT_TRUE(AllClose(c.to(kFloat64), a, 0, 0));
    c.add_(b);
    EXPECT_TRUE(is_channels_last(c));
    EXPECT_TRUE(AllClose(c, a + b, 0, 0));
  }
}

// Copies between two channels-last tensors run over flat memory (the
// float32 <-> bfloat16 conversions in their vectorised loops): the values
// of the planar conversions, the layout kept; a channels-last source into a
// contiguous destination still permutes.
TEST(ChannelsLast, ConversionsBetweenChannelsLastTensors) {
  const Tensor a = random({2, 33, 5, 7}, 8);
  const Tensor acl = a.contiguous(kCL);
  const Tensor h = acl.to(kBFloat16);
  EXPECT_TRUE(is_channels_last(h));
  EXPECT_TRUE(AllClose(h.to(kFloat32), a.to(kBFloat16).to(kFloat32), 0, 0));
  const Tensor back = h.to(kFloat32);
  EXPECT_TRUE(is_channels_last(back));
  EXPECT_TRUE(AllClose(back, a.to(kBFloat16).to(kFloat32), 0, 0));
  Tensor same = empty(a.sizes(), kFloat32, kCL);
  same.copy_(acl);
  EXPECT_TRUE(AllClose(same, a, 0, 0));
  Tensor planar = empty(a.sizes(), kBFloat16);
  planar.copy_(acl);
  EXPECT_TRUE(planar.is_contiguous());
  EXPECT_TRUE(AllClose(planar.to(kFloat32), a.to(kBFloat16).to(kFloat32), 0, 0));
}

struct BatchNormRun {
  Tensor out, grad_input, grad_weight, grad_bias, running_mean, running_var;
};

BatchNormRun batch_norm_run(const Tensor& x, const Tensor& go, bool training) {
  const DType stats = x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  const int64_t C = x.size(1);
  BatchNormRun r;
  r.running_mean = random({C}, 30, stats);
  r.running_var = random({C}, 31, stats).abs() + 0.5;
  const Tensor w = random({C}, 32, stats), b = random({C}, 33, stats);
  auto [out, mean, invstd] =
      native::batch_norm(x, r.running_mean, r.running_var, w, b, training, 0.1, 1e-5);
  r.out = out;
  native::batch_norm_backward(go, x, w, mean, invstd, training, true, true, true, r.grad_input,
                              r.grad_weight, r.grad_bias);
  return r;
}

// The channels-last kernels against the planar ones on NCHW copies: every
// output, gradient and running statistic, training and eval, several sizes
// (channels over one column chunk, rows over several row blocks).
TEST(ChannelsLast, BatchNormMatchesThePlanarKernels) {
  const std::vector<IntList> shapes = {{2, 3, 5, 7}, {4, 70, 9, 11}, {3, 600, 2, 3}, {2, 8, 1, 1}};
  for (DType dtype : {kFloat64, kFloat32, kBFloat16}) {
    const double tol = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-5 : 2e-2;
    for (const IntList& shape : shapes)
      for (bool training : {true, false}) {
        const Tensor x = random(shape, 40, dtype), go = random(shape, 41, dtype);
        const BatchNormRun planar = batch_norm_run(x, go, training);
        const BatchNormRun nhwc = batch_norm_run(x.contiguous(kCL), go.contiguous(kCL), training);
        const std::string what =
            std::string(dtype_name(dtype)) + " " + shape_str(shape) + (training ? " train" : " eval");
        if (shape[2] * shape[3] > 1) {
          EXPECT_TRUE(is_channels_last(nhwc.out)) << what;
          EXPECT_TRUE(is_channels_last(nhwc.grad_input)) << what;
        }
        EXPECT_EQ(nhwc.out.dtype(), dtype);
        EXPECT_TRUE(AllClose(nhwc.out, planar.out, tol, tol)) << what;
        EXPECT_TRUE(AllClose(nhwc.grad_input, planar.grad_input, tol, tol)) << what;
        EXPECT_TRUE(AllClose(nhwc.grad_weight, planar.grad_weight, tol, 10 * tol)) << what;
        EXPECT_TRUE(AllClose(nhwc.grad_bias, planar.grad_bias, tol, 10 * tol)) << what;
        EXPECT_TRUE(AllClose(nhwc.running_mean, planar.running_mean, tol, tol)) << what;
        EXPECT_TRUE(AllClose(nhwc.running_var, planar.running_var, tol, tol)) << what;
      }
  }
}

TEST(ChannelsLast, BatchNormGradcheck) {
  const Tensor scale = random_leaf({3, 4, 3, 2}, 50).detach();
  for (bool training : {true, false}) {
    EXPECT_TRUE(GradOk(
        [&](const std::vector<Tensor>& x) {
          const Tensor rm = zeros({4}, kFloat64), rv = ones({4}, kFloat64);
          return batch_norm(x[0].contiguous(kCL), rm, rv, x[1], x[2], training, 0.1, 1e-5) *
                 scale;
        },
        {random_leaf({3, 4, 3, 2}, 51), random_leaf({4}, 52), random_leaf({4}, 53)}));
  }
}

// Values, indices and gradients as the planar kernels', for windows with
// padding, dilation, ceil mode and overlaps; NaN wins in both.
TEST(ChannelsLast, MaxPoolMatchesThePlanarKernels) {
  struct Window {
    IntList kernel, stride, padding, dilation;
    bool ceil;
  };
  const std::vector<Window> windows = {{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
                                       {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
                                       {{3, 2}, {1, 2}, {1, 0}, {2, 1}, true}};
  for (DType dtype : {kFloat32, kFloat64, kBFloat16})
    for (const Window& k : windows)
      for (int64_t channels : {3, 300}) {
        Tensor x32 = random({2, channels, 9, 8}, 60);
        static_cast<float*>(x32.data_ptr())[(1 * 9 + 4) * 8 + 4] = std::nanf("");  // [0, 1, 4, 4]
        const Tensor x = x32.to(dtype);
        const Tensor go_shape_probe = std::get<0>(native::max_pool2d_with_indices(
            x, k.kernel, k.stride, k.padding, k.dilation, k.ceil));
        const Tensor go = random(go_shape_probe.sizes(), 61, dtype);
        auto [y, ix] =
            native::max_pool2d_with_indices(x, k.kernel, k.stride, k.padding, k.dilation, k.ceil);
        auto [ycl, ixcl] = native::max_pool2d_with_indices(x.contiguous(kCL), k.kernel, k.stride,
                                                           k.padding, k.dilation, k.ceil);
        const std::string what = std::string(dtype_name(dtype)) + " C=" + std::to_string(channels);
        EXPECT_TRUE(is_channels_last(ycl)) << what;
        EXPECT_TRUE(is_channels_last(ixcl)) << what;
        EXPECT_EQ(ycl.dtype(), dtype);
        EXPECT_TRUE(SameValues(ycl, y)) << what;
        EXPECT_TRUE(AllClose(ixcl, ix, 0, 0)) << what;
        const Tensor gi = native::max_pool2d_backward(go, x.sizes(), k.kernel, k.stride,
                                                      k.padding, k.dilation, k.ceil, ix);
        const Tensor gicl = native::max_pool2d_backward(go.contiguous(kCL), x.sizes(), k.kernel,
                                                        k.stride, k.padding, k.dilation, k.ceil,
                                                        ixcl);
        EXPECT_TRUE(is_channels_last(gicl)) << what;
        EXPECT_TRUE(AllClose(gicl, gi, 0, 0)) << what;
      }
}

TEST(ChannelsLast, MaxPoolGradcheck) {
  EXPECT_TRUE(GradOk(
      [](const std::vector<Tensor>& x) {
        return max_pool2d(x[0].contiguous(kCL), {3, 3}, {2, 2}, {1, 1});
      },
      {random_leaf({2, 3, 5, 5}, 70)}));
}

// A bfloat16 convolution that runs in oneDNN (AVX512-BF16 or AMX CPUs, not
// under LOOM_CPU_CONV=loom) reads and writes channels last when its input or
// weight is channels last, as PyTorch's; an NCHW one stays NCHW.  The values
// and gradients are the float32 convolution's rounded either way.
TEST(ChannelsLast, OneDnnBfloat16ConvolutionsFollowTheInputLayout) {
  native::ConvGeometry g;
  g.batch = 2;
  g.in_channels = 16;
  g.height = g.width = 10;
  g.out_channels = 32;
  g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = 1;
  g.out_h = g.out_w = 10;
  const int all = native::kConv2dForward | native::kConv2dBackwardData |
                  native::kConv2dBackwardWeights;
  const bool nhwc = native::conv2d_channels_last_stub.get(Device())(g, kBFloat16, all);
  EXPECT_EQ(native::conv2d_prefers_channels_last(Device(), kBFloat16, {2, 16, 10, 10},
                                                 {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1),
            nhwc);
  EXPECT_FALSE(native::conv2d_prefers_channels_last(Device(), kFloat64, {2, 16, 10, 10},
                                                    {32, 16, 3, 3}, {1}, {1}, {1}, 1));
  if (!nhwc) GTEST_SKIP() << "no oneDNN bfloat16 kernels here (" << cpu::onednn::describe() << ")";
  const Tensor x = random({2, 16, 10, 10}, 80, kBFloat16), w = random({32, 16, 3, 3}, 81, kBFloat16);
  const Tensor b = random({32}, 82, kBFloat16), go = random({2, 32, 10, 10}, 83, kBFloat16);
  const Tensor y32 = native::conv2d(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), {1, 1},
                                    {1, 1}, {1, 1}, 1);
  Tensor gi32, gw32, gb32;
  native::conv2d_backward(go.to(kFloat32), x.to(kFloat32), w.to(kFloat32), {1, 1}, {1, 1}, {1, 1},
                          1, true, true, true, gi32, gw32, gb32);
  struct Layout {
    Tensor input, weight;
    bool channels_last;
  };
  for (const Layout& k : {Layout{x, w, false}, Layout{x.contiguous(kCL), w, true},
                          Layout{x, w.contiguous(kCL), true}}) {
    const Tensor y = native::conv2d(k.input, k.weight, b, {1, 1}, {1, 1}, {1, 1}, 1);
    EXPECT_EQ(is_channels_last(y), k.channels_last);
    EXPECT_EQ(y.is_contiguous(), !k.channels_last);
    EXPECT_EQ(y.dtype(), kBFloat16);
    EXPECT_TRUE(AllClose(y.to(kFloat32), y32, 1e-2, 2e-2));
    for (const Tensor& grad : {go, go.contiguous(kCL)}) {
      Tensor gi, gw, gb;
      native::conv2d_backward(grad, k.input, k.weight, {1, 1}, {1, 1}, {1, 1}, 1, true, true,
                              true, gi, gw, gb);
      EXPECT_EQ(is_channels_last(gi), k.channels_last);
      EXPECT_TRUE(gw.is_contiguous());
      EXPECT_TRUE(AllClose(gi.to(kFloat32), gi32, 1e-2, 5e-2));
      EXPECT_TRUE(AllClose(gw.to(kFloat32), gw32, 1e-2, 2e-1));
      EXPECT_TRUE(AllClose(gb.to(kFloat32), gb32, 1e-2, 2e-1));
    }
  }
  // Unbatched input stays (C, H, W).
  const Tensor y3 = native::conv2d(x.select(0, 0), w, b, {1, 1}, {1, 1}, {1, 1}, 1);
  EXPECT_EQ(y3.sizes(), (IntList{32, 10, 10}));
  EXPECT_TRUE(AllClose(y3.to(kFloat32), y32.select(0, 0), 1e-2, 2e-2));
}

// 1x1 convolutions (ResNet's bottleneck ends): channels-last bfloat16
// passes match float32, with and without a bias (without one, oneDNN's
// matrix product is one of the ways timed, or the one pinned by
// LOOM_ONEDNN_LAYOUT=matmul), for the joint backward and the weight-only one.
TEST(ChannelsLast, OneDnnPointwiseConvolutions) {
  const IntList in_shape{3, 24, 5, 7}, w_shape{40, 24, 1, 1}, out_shape{3, 40, 5, 7};
  if (!native::conv2d_prefers_channels_last(Device(), kBFloat16, in_shape, w_shape, {1, 1},
                                            {0, 0}, {1, 1}, 1))
    GTEST_SKIP() << "no oneDNN bfloat16 kernels here (" << cpu::onednn::describe() << ")";
  const Tensor x = random(in_shape, 90, kBFloat16).contiguous(kCL);
  const Tensor w = random(w_shape, 91, kBFloat16), b = random({40}, 92, kBFloat16);
  const Tensor go = random(out_shape, 93, kBFloat16).contiguous(kCL);
  for (bool with_bias : {false, true}) {
    const Tensor bias = with_bias ? b : Tensor();
    const Tensor y32 = native::conv2d(x.to(kFloat32), w.to(kFloat32),
                                      with_bias ? b.to(kFloat32) : Tensor(), {1, 1}, {0, 0},
                                      {1, 1}, 1);
    Tensor gi32, gw32, gb32;
    native::conv2d_backward(go.to(kFloat32), x.to(kFloat32), w.to(kFloat32), {1, 1}, {0, 0},
                            {1, 1}, 1, true, true, with_bias, gi32, gw32, gb32);
    const Tensor y = native::conv2d(x, w, bias, {1, 1}, {0, 0}, {1, 1}, 1);
    ASSERT_EQ(y.sizes(), out_shape);
    EXPECT_TRUE(is_channels_last(y));
    EXPECT_TRUE(AllClose(y.to(kFloat32), y32, 1e-2, 2e-2)) << (with_bias ? "bias" : "no bias");
    Tensor gi, gw, gb, gi_unused, gw_only, gb_only;
    native::conv2d_backward(go, x, w, {1, 1}, {0, 0}, {1, 1}, 1, true, true, with_bias, gi, gw,
                            gb);
    ASSERT_EQ(gi.sizes(), in_shape);
    ASSERT_EQ(gw.sizes(), w_shape);
    EXPECT_TRUE(is_channels_last(gi));
    EXPECT_TRUE(AllClose(gi.to(kFloat32), gi32, 1e-2, 5e-2)) << (with_bias ? "bias" : "no bias");
    EXPECT_TRUE(AllClose(gw.to(kFloat32), gw32, 1e-2, 2e-1)) << (with_bias ? "bias" : "no bias");
    if (with_bias) {
      EXPECT_TRUE(AllClose(gb.to(kFloat32), gb32, 1e-2, 2e-1));
    }
    native::conv2d_backward(go, x, w, {1, 1}, {0, 0}, {1, 1}, 1, false, true, with_bias,
                            gi_unused, gw_only, gb_only);
    EXPECT_TRUE(AllClose(gw_only, gw, 0, 0)) << (with_bias ? "bias" : "no bias");
  }
}

// A model written for NCHW keeps working under autocast: its convolutions
// return NCHW for NCHW inputs, so view() after them holds (as in PyTorch);
// nn::Conv2d says when converting the input would pay.
TEST(ChannelsLast, NchwModelsStayNchwUnderAutocast) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).padding(1));
  const Tensor x = random({2, 3, 6, 6}, 84);
  EXPECT_FALSE(conv->runs_channels_last(x.to(kFloat64)));
  amp::AutocastGuard autocast(kCPU);
  const Tensor y = conv(x);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_EQ(y.relu().view({2, -1}).sizes(), (IntList{2, 8 * 36}));
  const bool nhwc = conv->runs_channels_last(x);
  EXPECT_EQ(nhwc, native::conv2d_prefers_channels_last(Device(), kBFloat16, x.sizes(),
                                                       {8, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1));
  EXPECT_EQ(is_channels_last(conv(x.contiguous(kCL))), nhwc);
}

// Every way oneDNN runs channels-last passes (NHWC as it is; its blocked
// layouts through reorders; a matrix product for 1x1 convolutions) gives
// those values: the convolution tests above under each pinned
// LOOM_ONEDNN_LAYOUT.
TEST(ChannelsLast, OneDnnLayoutsAgreeWhenPinned) {
  if (std::getenv("LOOM_ONEDNN_LAYOUT") != nullptr) GTEST_SKIP() << "layout set by the environment";
  EXPECT_EQ(cpu::onednn::channels_last_layout(), "auto");
  for (const char* layout : {"nhwc", "blocked", "matmul"})
    EXPECT_EQ(testing::run_with_env("/proc/self/exe", "LOOM_ONEDNN_LAYOUT", layout,
                                    "--gtest_filter=ChannelsLast.OneDnn*:"
                                    "ChannelsLast.SmallNetworkStaysChannelsLast"),
              0)
        << "LOOM_ONEDNN_LAYOUT=" << layout;
}

TEST(ChannelsLastDeathTest, BadLayoutIsAnError) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        setenv("LOOM_ONEDNN_LAYOUT", "nchw", 1);
        try {
          cpu::onednn::channels_last_layout();
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3), "LOOM_ONEDNN_LAYOUT: expected");
}

// conv -> batch norm -> ReLU -> max pool -> conv in bfloat16 with autograd,
// from a channels-last input: activations stay channels last end to end
// where the convolutions run so.  With batch norm on running statistics the outputs and gradients equal
// the float32 network's within bfloat16 rounding (see below); in training mode (batch
// statistics at batch 2: near-cancelling sums, bfloat16 noise either way,
// the same bits as without channels last) the layout is checked.
TEST(ChannelsLast, SmallNetworkStaysChannelsLast) {
  const Tensor x = random({2, 3, 12, 12}, 90);
  const Tensor w1 = random({16, 3, 3, 3}, 91) * 0.3, w2 = random({8, 16, 3, 3}, 92) * 0.2;
  auto run = [&](DType dtype, bool training) {
    Tensor a = w1.to(dtype).detach().requires_grad_(), b = w2.to(dtype).detach().requires_grad_();
    const Tensor gamma = ones({16}, kFloat32).requires_grad_();
    const Tensor rm = zeros({16}, kFloat32), rv = ones({16}, kFloat32);
    // The bfloat16 network opts in with a channels-last input.
    const Tensor in = dtype == kBFloat16 ? x.to(dtype).contiguous(kCL) : x;
    Tensor h = conv2d(in, a, Tensor(), {1, 1}, {1, 1});
    const bool nhwc = dtype == kBFloat16 && is_channels_last(h);
    h = batch_norm(h, rm, rv, gamma, Tensor(), training).relu();
    if (nhwc) {
      EXPECT_TRUE(is_channels_last(h));
    }
    h = max_pool2d(h, {2, 2});
    if (nhwc) {
      EXPECT_TRUE(is_channels_last(h));
    }
    h = conv2d(h, b, Tensor(), {1, 1}, {1, 1});
    if (nhwc) {
      EXPECT_TRUE(is_channels_last(h));
    }
    h.to(kFloat32).pow(2).sum().backward();
    if (nhwc) {
      EXPECT_TRUE(is_channels_last(a.grad()) || a.grad().is_contiguous());
    }
    return std::vector<Tensor>{h.to(kFloat32), a.grad().to(kFloat32), b.grad().to(kFloat32),
                               gamma.grad()};
  };
  const auto ref = run(kFloat32, false);
  const auto low = run(kBFloat16, false);
  // The output, the second convolution's and batch norm's gradients.  The
  // first convolution's gradient comes through max pooling, where bfloat16
  // rounding moves some windows' maxima (and their whole gradient) to
  // another input: no tolerance holds there, in either layout.
  for (size_t i : {0, 2, 3}) {
    const double scale = ref[i].abs().max().item<double>();
    EXPECT_TRUE(AllClose(low[i], ref[i], 5e-2, 5e-2 * scale)) << "output/gradient " << i;
  }
  for (const Tensor& t : run(kBFloat16, true))
    for (double v : t.to_vector<double>()) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace loom
