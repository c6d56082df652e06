// oneDNN's convolutions (tensor/cpu/OneDnnConvolution.h) against loom's own
// kernels on the same buffers: every pass, the shapes of conv_test's chunking
// cases plus ResNet's, concurrent calls from two logical devices' threads; the
// per-shape choice between them (tensor/cpu/ConvChoice.h), the LOOM_CPU_CONV
// switch and its error; Winograd's kernels and LOOM_ONEDNN_ALGORITHM;
// bfloat16 convolutions through native::conv2d (in oneDNN's bfloat16 kernels
// where the CPU has them).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <iostream>
#include <thread>

#include "tensor/Parallel.h"
#include "tensor/cpu/ConvChoice.h"
#include "tensor/cpu/Convolution.h"
#include "tensor/cpu/OneDnnConvolution.h"
#include "tensor/native/Convolution.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using cpu::onednn::ConvPass;
using testing::AllClose;

struct Case {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
};

native::ConvGeometry geometry(const Case& k) {
  native::ConvGeometry g;
  g.batch = k.n;
  g.in_channels = k.c;
  g.height = k.h;
  g.width = k.w;
  g.out_channels = k.o;
  g.kernel_h = k.kh;
  g.kernel_w = k.kw;
  g.stride_h = k.sh;
  g.stride_w = k.sw;
  g.pad_h = k.ph;
  g.pad_w = k.pw;
  g.dilation_h = k.dh;
  g.dilation_w = k.dw;
  g.groups = k.groups;
  g.out_h = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
  g.out_w = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
  return g;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {5, 16, 24, 24, 8, 5, 5, 1, 1, 2, 2, 1, 1, 1},       // ConvNet-like
      {80, 16, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1},       // many small images
      {4, 24, 9, 9, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1},        // 1x1
      {5, 12, 3, 5, 8, 1, 1, 1, 1, 0, 0, 1, 1, 2},         // 1x1, groups
      {3, 8, 9, 9, 6, 1, 1, 2, 2, 0, 0, 1, 1, 2},          // 1x1 stride 2, odd plane
      {4, 6, 11, 10, 9, 3, 2, 2, 3, 1, 2, 2, 1, 3},        // everything uneven
      {3, 8, 12, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2},        // dilation, groups
      {2, 4, 10, 14, 8, 3, 5, 1, 1, 1, 2, 1, 1, 1},        // asymmetric kernel
      {2, 3, 32, 32, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1},       // a ResNet stem
      {2, 64, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1},      // a ResNet downsampling 3x3
      {2, 32, 15, 15, 64, 1, 1, 2, 2, 0, 0, 1, 1, 1},      // a ResNet shortcut, odd plane
      {3, 16, 7, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},       // depthwise
      {2, 1, 28, 28, 16, 5, 5, 1, 1, 2, 2, 1, 1, 1},       // one input channel
      {2, 32, 12, 12, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // a ResNet 3x3 (Winograd's shape)
  };
  return c;
}

struct Buffers {
  Tensor x, w, b, go;
};

Buffers buffers(const native::ConvGeometry& g, uint64_t seed) {
  Generator gen(seed);
  return {randn({g.batch, g.in_channels, g.height, g.width}, kFloat32, &gen),
          randn({g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w}, kFloat32,
                &gen),
          randn({g.out_channels}, kFloat32, &gen),
          randn({g.batch, g.out_channels, g.out_h, g.out_w}, kFloat32, &gen)};
}

float* f(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

TEST(OneDnnConv, DescribesItself) {
  const std::string d = cpu::onednn::describe();
  EXPECT_EQ(d.rfind("oneDNN 2.", 0), 0u) << d;
}

TEST(OneDnnConv, EveryPassMatchesLoomKernels) {
  int index = 0, ran = 0;
  for (const Case& k : cases()) {
    const native::ConvGeometry g = geometry(k);
    const Buffers in = buffers(g, 100 + index);
    const Tensor y_loom = empty({g.batch, g.out_channels, g.out_h, g.out_w});
    const Tensor y = empty_like(y_loom), gi_loom = empty_like(in.x), gi = empty_like(in.x);
    const Tensor gw_loom = empty_like(in.w), gw = empty_like(in.w);
    const Tensor gb_loom = empty_like(in.b), gb = empty_like(in.b);
    cpu::conv2d_forward<float>(g, f(in.x), f(in.w), f(in.b), f(y_loom));
    cpu::conv2d_backward<float>(g, f(in.x), f(in.w), f(in.go), f(gi_loom), f(gw_loom),
                                f(gb_loom));
    if (cpu::onednn::available(ConvPass::kForward, g, kFloat32)) {
      cpu::onednn::conv2d_forward(g, kFloat32, f(in.x), f(in.w), f(in.b), f(y));
      EXPECT_EQ(y.sizes(), y_loom.sizes());
      EXPECT_TRUE(AllClose(y, y_loom, 1e-4, 1e-4)) << "forward, case " << index;
      // Without bias.
      cpu::onednn::conv2d_forward(g, kFloat32, f(in.x), f(in.w), nullptr, f(y));
      EXPECT_TRUE(AllClose(y, y_loom - in.b.reshape({1, g.out_channels, 1, 1}), 1e-4, 1e-4))
          << "forward without bias, case " << index;
      ++ran;
    }
    if (cpu::onednn::available(ConvPass::kBackwardData, g, kFloat32)) {
      cpu::onednn::conv2d_backward_data(g, kFloat32, f(in.w), f(in.go), f(gi));
      EXPECT_TRUE(AllClose(gi, gi_loom, 1e-4, 1e-3)) << "input gradient, case " << index;
      ++ran;
    }
    if (cpu::onednn::available(ConvPass::kBackwardWeights, g, kFloat32)) {
      cpu::onednn::conv2d_backward_weights(g, kFloat32, f(in.x), f(in.go), f(gw), f(gb));
      EXPECT_TRUE(AllClose(gw, gw_loom, 1e-4, 1e-3)) << "weight gradient, case " << index;
      EXPECT_TRUE(AllClose(gb, gb_loom, 1e-4, 1e-3)) << "bias gradient, case " << index;
      const Tensor gw2 = empty_like(in.w);
      cpu::onednn::conv2d_backward_weights(g, kFloat32, f(in.x), f(in.go), f(gw2), nullptr);
      EXPECT_TRUE(AllClose(gw2, gw_loom, 1e-4, 1e-3)) << "weight gradient alone, case " << index;
      ++ran;
    }
    ++index;
  }
  // oneDNN has float32 kernels for every x86-64 CPU with SSE4.1: most passes ran.
  EXPECT_GE(ran, 3 * static_cast<int>(cases().size()) - 6);
}

// Both backward passes in one call (the output gradient reordered once)
// give the separate passes' results bit for bit, float32 and bfloat16.
TEST(OneDnnConv, JointBackwardIsTheSeparatePasses) {
  int index = 0, ran = 0;
  for (const Case& k : cases()) {
    const native::ConvGeometry g = geometry(k);
    const Buffers in = buffers(g, 300 + index++);
    for (DType d : {kFloat32, kBFloat16}) {
      if (!cpu::onednn::available(ConvPass::kBackwardData, g, d) ||
          !cpu::onednn::available(ConvPass::kBackwardWeights, g, d))
        continue;
      const Tensor x = in.x.to(d), w = in.w.to(d), go = in.go.to(d);
      const Tensor gi = empty_like(x), gw = empty_like(w), gb = empty_like(in.b.to(d));
      const Tensor gi2 = empty_like(x), gw2 = empty_like(w), gb2 = empty_like(gb);
      cpu::onednn::conv2d_backward_data(g, d, w.data_ptr(), go.data_ptr(), gi.data_ptr());
      cpu::onednn::conv2d_backward_weights(g, d, x.data_ptr(), go.data_ptr(), gw.data_ptr(),
                                           gb.data_ptr());
      cpu::onednn::conv2d_backward(g, d, x.data_ptr(), w.data_ptr(), go.data_ptr(),
                                   gi2.data_ptr(), gw2.data_ptr(), gb2.data_ptr());
      EXPECT_EQ(gi2.sizes(), gi.sizes());
      EXPECT_TRUE(AllClose(gi2.to(kFloat32), gi.to(kFloat32), 0, 0)) << "input gradient, case " << index - 1 << ", " << dtype_name(d);
      EXPECT_TRUE(AllClose(gw2.to(kFloat32), gw.to(kFloat32), 0, 0)) << "weight gradient, case " << index - 1 << ", " << dtype_name(d);
      EXPECT_TRUE(AllClose(gb2.to(kFloat32), gb.to(kFloat32), 0, 0)) << "bias gradient, case " << index - 1 << ", " << dtype_name(d);
      ++ran;
    }
  }
  EXPECT_GE(ran, static_cast<int>(cases().size()) - 2);  // float32 at least
}

TEST(OneDnnConv, NoKernelForFloat64) {
  const native::ConvGeometry g = geometry(cases()[0]);
  EXPECT_FALSE(cpu::onednn::available(ConvPass::kForward, g, kFloat64));
  EXPECT_TRUE(cpu::conv_pass_settled_on_loom(ConvPass::kForward, g, kFloat64));
}

// Two CPU logical devices' workers convolving at once, one thread each, give
// what one thread alone gives (within float32 rounding: the way timed
// fastest, Winograd's or the direct kernels, may differ by thread count).
TEST(OneDnnConv, ConcurrentCallsFromTwoThreads) {
  const native::ConvGeometry g = geometry({8, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  if (!cpu::onednn::available(ConvPass::kForward, g, kFloat32)) GTEST_SKIP() << "no kernel";
  const Buffers in = buffers(g, 7);
  const Tensor expected = empty({g.batch, g.out_channels, g.out_h, g.out_w});
  cpu::onednn::conv2d_forward(g, kFloat32, f(in.x), f(in.w), f(in.b), f(expected));
  bool same[2] = {true, true};
  auto worker = [&](int id) {
    set_thread_num_threads(1);
    const Tensor y = empty_like(expected);
    for (int i = 0; i < 20; ++i) {
      cpu::onednn::conv2d_forward(g, kFloat32, f(in.x), f(in.w), f(in.b), f(y));
      same[id] = same[id] && AllClose(y, expected, 1e-4, 1e-4);
    }
    set_thread_num_threads(0);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_TRUE(same[0]);
  EXPECT_TRUE(same[1]);
}

// Through conv2d and its backward (the dispatch): whatever LOOM_CPU_CONV picks
// gives loom's own kernels' values.
TEST(OneDnnConv, DispatchedConvMatchesLoomKernels) {
  const native::ConvGeometry g = geometry({4, 64, 16, 16, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1});
  const Buffers in = buffers(g, 11);
  const Tensor y = native::conv2d(in.x, in.w, in.b, {2, 2}, {1, 1}, {1, 1}, 1);
  const Tensor y_loom = empty_like(y);
  cpu::conv2d_forward<float>(g, f(in.x), f(in.w), f(in.b), f(y_loom));
  EXPECT_TRUE(AllClose(y, y_loom, 1e-4, 1e-4));
  Tensor gi, gw, gb;
  native::conv2d_backward(in.go, in.x, in.w, {2, 2}, {1, 1}, {1, 1}, 1, true, true, true, gi, gw,
                          gb);
  const Tensor gi_loom = empty_like(in.x), gw_loom = empty_like(in.w), gb_loom = empty_like(in.b);
  cpu::conv2d_backward<float>(g, f(in.x), f(in.w), f(in.go), f(gi_loom), f(gw_loom),
                              f(gb_loom));
  EXPECT_TRUE(AllClose(gi, gi_loom, 1e-4, 1e-3));
  EXPECT_TRUE(AllClose(gw, gw_loom, 1e-4, 1e-3));
  EXPECT_TRUE(AllClose(gb, gb_loom, 1e-4, 1e-3));
  // Only the bias gradient: defined, the others not.
  Tensor gi2, gw2, gb2;
  native::conv2d_backward(in.go, in.x, in.w, {2, 2}, {1, 1}, {1, 1}, 1, false, false, true, gi2,
                          gw2, gb2);
  EXPECT_FALSE(gi2.defined());
  EXPECT_FALSE(gw2.defined());
  EXPECT_TRUE(AllClose(gb2, gb_loom, 1e-4, 1e-3));
}

// bfloat16 convolutions (autocast's) run in oneDNN's bfloat16 kernels where
// the CPU has them (AVX512-BF16, AMX) and LOOM_CPU_CONV is not loom, else in
// float32 from the same bfloat16 values, rounded once: either way within
// bfloat16's rounding of the float32 result, with bfloat16 outputs and
// gradients (the bias-only backward too).
TEST(OneDnnConv, Bfloat16ConvolutionsMatchFloat32Rounded) {
  const bool pinned_loom = cpu::onednn::conv_backend() == "loom";
  int native_passes = 0;
  for (const Case& k : cases()) {
    const native::ConvGeometry g = geometry(k);
    const Buffers in = buffers(g, 21);
    const Tensor x = in.x.to(kBFloat16), w = in.w.to(kBFloat16), b = in.b.to(kBFloat16);
    const Tensor go = in.go.to(kBFloat16);
    const IntList stride = {k.sh, k.sw}, pad = {k.ph, k.pw}, dil = {k.dh, k.dw};
    const Tensor y = native::conv2d(x, w, b, stride, pad, dil, k.groups);
    const Tensor y32 = native::conv2d(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), stride, pad,
                                      dil, k.groups);
    ASSERT_EQ(y.dtype(), kBFloat16);
    // Sums of up to a few hundred products of bfloat16 values: float32
    // accumulation in either order, one rounding to bfloat16 (2^-8 relative).
    EXPECT_TRUE(AllClose(y.to(kFloat32), y32, 1e-2, 2e-2)) << shape_str({k.n, k.c, k.h, k.w});
    Tensor gi, gw, gb, gi32, gw32, gb32;
    native::conv2d_backward(go, x, w, stride, pad, dil, k.groups, true, true, true, gi, gw, gb);
    native::conv2d_backward(go.to(kFloat32), x.to(kFloat32), w.to(kFloat32), stride, pad, dil,
                            k.groups, true, true, true, gi32, gw32, gb32);
    ASSERT_EQ(gi.dtype(), kBFloat16);
    ASSERT_EQ(gw.dtype(), kBFloat16);
    ASSERT_EQ(gb.dtype(), kBFloat16);
    EXPECT_TRUE(AllClose(gi.to(kFloat32), gi32, 1e-2, 5e-2)) << "input grad";
    EXPECT_TRUE(AllClose(gw.to(kFloat32), gw32, 1e-2, 2e-1)) << "weight grad";
    EXPECT_TRUE(AllClose(gb.to(kFloat32), gb32, 1e-2, 2e-1)) << "bias grad";
    Tensor gi2, gw2, gb2;
    native::conv2d_backward(go, x, w, stride, pad, dil, k.groups, false, false, true, gi2, gw2,
                            gb2);
    EXPECT_FALSE(gi2.defined() || gw2.defined());
    EXPECT_TRUE(AllClose(gb2.to(kFloat32), gb32, 1e-2, 2e-1)) << "bias-only grad";
    const bool native = native::conv2d_takes_stub.get(Device())(
        g, kBFloat16, native::kConv2dForward | native::kConv2dBackwardData |
                          native::kConv2dBackwardWeights);
    EXPECT_EQ(native, !pinned_loom && cpu::onednn::available(ConvPass::kForward, g, kBFloat16) &&
                          cpu::onednn::available(ConvPass::kBackwardData, g, kBFloat16) &&
                          cpu::onednn::available(ConvPass::kBackwardWeights, g, kBFloat16));
    native_passes += native;
  }
  std::cout << native_passes << " of " << cases().size()
            << " shapes ran in bfloat16 kernels (" << cpu::onednn::describe() << ")\n";
  // float16 has no CPU kernel: always float32 and rounded.
  EXPECT_FALSE(native::conv2d_takes_stub.get(Device())(geometry(cases()[0]), kFloat16,
                                                       native::kConv2dForward));
}

// oneDNN 2.6's jit_bf16_1x1 backward-data kernel (avx512_core_bf16), given
// NHWC as it is, writes wrong input gradients when the output channels are
// odd and an image has 30, 60, 90 or 120 pixels (every such shape of 1-40
// output channels and 1-12 x 1-12 images; errors as large as the
// gradients).  Such passes go through the blocked layouts instead.  Checked
// under whichever LOOM_ONEDNN_LAYOUT is set, and re-run under each below.
TEST(OneDnnConv, Bfloat16PointwiseBackwardDataWithOddOutputChannels) {
  const std::vector<Case> shapes = {
      {1, 4, 6, 5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {4, 16, 5, 6, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {2, 32, 10, 6, 17, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {2, 8, 10, 12, 33, 1, 1, 1, 1, 0, 0, 1, 1, 1},
  };
  for (const Case& k : shapes) {
    const native::ConvGeometry g = geometry(k);
    const Buffers in = buffers(g, 41);
    constexpr MemoryFormat kLast = MemoryFormat::kChannelsLast;
    const Tensor x = in.x.to(kBFloat16).contiguous(kLast), w = in.w.to(kBFloat16);
    const Tensor go = in.go.to(kBFloat16).contiguous(kLast);
    Tensor gi, gw, gb, gi32, gw32, gb32;
    native::conv2d_backward(go, x, w, {1}, {0}, {1}, 1, true, false, false, gi, gw, gb);
    native::conv2d_backward(go.to(kFloat32), x.to(kFloat32), w.to(kFloat32), {1}, {0}, {1}, 1,
                            true, false, false, gi32, gw32, gb32);
    ASSERT_EQ(gi.sizes(), gi32.sizes());
    EXPECT_TRUE(AllClose(gi.to(kFloat32), gi32, 1e-2, 5e-2))
        << shape_str({k.n, k.c, k.h, k.w}) << " to " << k.o << " channels, oneDNN "
        << cpu::onednn::describe();
  }
}

TEST(OneDnnConv, PointwiseBackwardDataUnderEachLayout) {
  if (std::getenv("LOOM_ONEDNN_LAYOUT") != nullptr) GTEST_SKIP() << "layout set by the environment";
  for (const char* layout : {"nhwc", "blocked", "matmul"})
    EXPECT_EQ(testing::run_with_env(
                  "/proc/self/exe", "LOOM_ONEDNN_LAYOUT", layout,
                  "--gtest_filter=OneDnnConv.Bfloat16PointwiseBackwardDataWithOddOutputChannels"),
              0)
        << "LOOM_ONEDNN_LAYOUT=" << layout;
}

// LOOM_CPU_CONV=auto times each large float32 pass once per shape and keeps
// the choice; small passes stay with loom's kernels untimed.  Pinned
// backends never time.
TEST(OneDnnConv, ChoiceFollowsTheEnvironment) {
  const char* env = std::getenv("LOOM_CPU_CONV");
  const std::string backend = env == nullptr || *env == '\0' ? "auto" : env;
  EXPECT_EQ(cpu::onednn::conv_backend(), backend);
  const native::ConvGeometry big = geometry({4, 32, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  const native::ConvGeometry small = geometry({1, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  const bool have = cpu::onednn::available(ConvPass::kForward, big, kFloat32);
  const cpu::ConvChoiceStats before = cpu::conv_choice_stats();
  for (int i = 0; i < 3; ++i) {
    const Buffers a = buffers(big, 1), b = buffers(small, 2);
    native::conv2d(a.x, a.w, a.b, {1, 1}, {1, 1}, {1, 1}, 1);
    native::conv2d(b.x, b.w, b.b, {1, 1}, {1, 1}, {1, 1}, 1);
  }
  const cpu::ConvChoiceStats after = cpu::conv_choice_stats();
  EXPECT_EQ(after.decided - before.decided, backend == "auto" && have ? 1 : 0);
  EXPECT_TRUE(cpu::conv_pass_settled_on_loom(ConvPass::kForward, small, kFloat32) ||
              backend == "onednn");
  if (backend == "loom") {
    EXPECT_TRUE(cpu::conv_pass_settled_on_loom(ConvPass::kForward, big, kFloat32));
  }
  if (backend == "onednn") {
    EXPECT_EQ(cpu::conv_pass_settled_on_loom(ConvPass::kForward, big, kFloat32), !have);
  }
}

// The timed choice runs each side once before timing them, so neither is
// timed on a first call that settles its own choices or makes its weight
// copies: then interleaved, twice each, the faster last.
TEST(OneDnnConv, ChoiceWarmsBothSidesBeforeTiming) {
  if (cpu::onednn::conv_backend() != "auto") GTEST_SKIP() << "a pinned backend is not timed";
  const native::ConvGeometry g = geometry({3, 40, 21, 21, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  if (!cpu::onednn::available(ConvPass::kForward, g, kFloat32)) GTEST_SKIP() << "no kernel";
  std::string calls;
  auto spin = [](double ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(int(ms * 1e3));
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  // loom's first call is slow (its own timing), later ones faster than oneDNN.
  cpu::run_conv_pass(
      ConvPass::kForward, g, kFloat32,
      [&] { spin(calls.find('L') == std::string::npos ? 20 : 0.5); calls += 'L'; },
      [&] { spin(2); calls += 'D'; });
  ASSERT_GE(calls.size(), 6u) << calls;
  EXPECT_EQ(calls.substr(0, 2), "DL") << calls;
  EXPECT_EQ(std::count(calls.begin(), calls.end(), 'L'), 3) << calls;
  EXPECT_EQ(calls.back(), 'L') << calls;  // the faster ran last
  EXPECT_TRUE(cpu::conv_pass_settled_on_loom(ConvPass::kForward, g, kFloat32));
  calls.clear();
  cpu::run_conv_pass(ConvPass::kForward, g, kFloat32, [&] { calls += 'L'; },
                     [&] { calls += 'D'; });
  EXPECT_EQ(calls, "L");  // settled: no more timing
}

// LOOM_ONEDNN_ALGORITHM: "winograd" runs every pass of a float32 3x3
// stride-1 convolution in oneDNN's Winograd kernels where it has them
// (AVX-512), NCHW and channels last alike; "direct" never does; "auto" times
// them beside the direct ways.  Whichever runs gives loom's kernels' values
// within float32 tolerance; a strided 3x3 never runs Winograd.
TEST(OneDnnConv, WinogradFollowsTheEnvironment) {
  const char* env = std::getenv("LOOM_ONEDNN_ALGORITHM");
  const std::string algorithm = env == nullptr || *env == '\0' ? "auto" : env;
  EXPECT_EQ(cpu::onednn::conv_algorithm(), algorithm);
  const native::ConvGeometry nchw = geometry({4, 32, 14, 14, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  if (!cpu::onednn::available(ConvPass::kForward, nchw, kFloat32)) GTEST_SKIP() << "no kernel";
  const bool avx512 = cpu::onednn::describe().find("avx512") != std::string::npos;
  const Buffers in = buffers(nchw, 31);
  const Tensor y_loom = empty({nchw.batch, nchw.out_channels, nchw.out_h, nchw.out_w});
  const Tensor gi_loom = empty_like(in.x), gw_loom = empty_like(in.w), gb_loom = empty_like(in.b);
  cpu::conv2d_forward<float>(nchw, f(in.x), f(in.w), f(in.b), f(y_loom));
  cpu::conv2d_backward<float>(nchw, f(in.x), f(in.w), f(in.go), f(gi_loom), f(gw_loom),
                              f(gb_loom));
  native::ConvGeometry nhwc = nchw;
  nhwc.channels_last = true;
  for (const native::ConvGeometry& g : {nchw, nhwc}) {
    const MemoryFormat format = channels_last_if(g.channels_last);
    const std::string layout = g.channels_last ? "channels last" : "NCHW";
    const Tensor x = in.x.contiguous(format), go = in.go.contiguous(format);
    const Tensor y = empty(y_loom.sizes(), kFloat32, format);
    const Tensor gi = empty(in.x.sizes(), kFloat32, format);
    const Tensor gw = empty_like(in.w), gb = empty_like(in.b);
    cpu::onednn::conv2d_forward(g, kFloat32, f(x), f(in.w), f(in.b), f(y));
    cpu::onednn::conv2d_backward(g, kFloat32, f(x), f(in.w), f(go), f(gi), f(gw), f(gb));
    EXPECT_TRUE(AllClose(y.contiguous(), y_loom, 1e-4, 1e-4)) << layout;
    EXPECT_TRUE(AllClose(gi.contiguous(), gi_loom, 1e-4, 1e-3)) << layout;
    EXPECT_TRUE(AllClose(gw, gw_loom, 1e-4, 1e-3)) << layout;
    EXPECT_TRUE(AllClose(gb, gb_loom, 1e-4, 1e-3)) << layout;
    for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights}) {
      const std::string impl =
          cpu::onednn::implementation(pass, g, kFloat32, pass != ConvPass::kBackwardData);
      const bool winograd = impl.find("wino") != std::string::npos;
      EXPECT_FALSE(impl.empty()) << layout << ": the pass ran, so its way is decided";
      if (algorithm == "winograd") {
        EXPECT_EQ(winograd, avx512) << layout << ": " << impl;
      }
      if (algorithm == "direct") {
        EXPECT_FALSE(winograd) << layout << ": " << impl;
      }
    }
  }
  const native::ConvGeometry strided = geometry({4, 32, 14, 14, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1});
  const Tensor y2 = empty({strided.batch, strided.out_channels, strided.out_h, strided.out_w});
  cpu::onednn::conv2d_forward(strided, kFloat32, f(in.x), f(in.w), f(in.b), f(y2));
  EXPECT_EQ(cpu::onednn::implementation(ConvPass::kForward, strided, kFloat32, true).find("wino"),
            std::string::npos);
}

// The oneDNN tests above under each pinned LOOM_ONEDNN_ALGORITHM: every
// pass within tolerance of loom's kernels in Winograd's kernels too, and the
// joint backward still bit for bit the separate passes.
TEST(OneDnnConv, PassesAgreeUnderEachAlgorithm) {
  if (std::getenv("LOOM_ONEDNN_ALGORITHM") != nullptr)
    GTEST_SKIP() << "algorithm set by the environment";
  for (const char* algorithm : {"winograd", "direct"})
    EXPECT_EQ(testing::run_with_env("/proc/self/exe", "LOOM_ONEDNN_ALGORITHM", algorithm,
                                    "--gtest_filter=OneDnnConv.EveryPass*:OneDnnConv.Joint*:"
                                    "OneDnnConv.Winograd*:OneDnnConv.Dispatched*"),
              0)
        << "LOOM_ONEDNN_ALGORITHM=" << algorithm;
}

int run_with_backend(const std::string& binary, const char* backend, const char* arg) {
  return testing::run_with_env(binary, "LOOM_CPU_CONV", backend, arg);
}

// conv_test (every chunking path of loom's kernels against a naive double
// convolution, through the dispatch) passes with each backend pinned (and
// oneDNN's direct algorithm), and the choice test above holds under each.
TEST(OneDnnConv, ConvTestPassesUnderEachBackend) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) GTEST_SKIP() << "needs bazel's runfiles (TEST_SRCDIR)";
  if (std::getenv("LOOM_CPU_CONV") != nullptr) GTEST_SKIP() << "backend set by the environment";
  const std::string conv_test = std::string(srcdir) + "/loom/tests/tensor/conv_test";
  for (const char* backend : {"onednn", "loom"}) {
    // conv_test's tolerances are the direct kernels' (Winograd rounds ~10x
    // more and has its own tests above): the timed choice must not take it.
    EXPECT_EQ(testing::run_with_env(conv_test,
                                    {{"LOOM_CPU_CONV", backend}, {"LOOM_ONEDNN_ALGORITHM", "direct"}},
                                    "--gtest_brief=1"),
              0)
        << "conv_test with LOOM_CPU_CONV=" << backend << ", LOOM_ONEDNN_ALGORITHM=direct";
    EXPECT_EQ(run_with_backend("/proc/self/exe", backend,
                               "--gtest_filter=OneDnnConv.ChoiceFollowsTheEnvironment:"
                               "OneDnnConv.Bfloat16ConvolutionsMatchFloat32Rounded"),
              0)
        << "ChoiceFollowsTheEnvironment and the bfloat16 test with LOOM_CPU_CONV=" << backend;
  }
}

TEST(OneDnnConvDeathTest, BadBackendIsAnError) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        setenv("LOOM_CPU_CONV", "mkl", 1);
        try {
          cpu::onednn::conv_backend();
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3), "LOOM_CPU_CONV: expected \"auto\", \"onednn\" or \"loom\", got \"mkl\"");
}

TEST(OneDnnConvDeathTest, BadAlgorithmIsAnError) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        setenv("LOOM_ONEDNN_ALGORITHM", "fft", 1);
        try {
          cpu::onednn::conv_algorithm();
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3),
      "LOOM_ONEDNN_ALGORITHM: expected \"auto\", \"direct\" or \"winograd\", got \"fft\"");
}

}  // namespace
}  // namespace loom
