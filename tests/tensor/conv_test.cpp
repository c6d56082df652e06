// conv2d forward values, gradients against a naive direct convolution, and
// errors.  The fixed expected values were computed with PyTorch 1.13
// (torch.nn.functional.conv2d) on the same pattern inputs.  The shapes in
// ConvMatchesNaive are chosen to reach every chunking path of the kernel:
// pixel-split chunks, multi-image chunks, the sequential scheme, 1x1.
#include "tensor/native/Convolution.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

// The tolerances here are a direct convolution's: where the timed choice
// (LOOM_CPU_CONV=auto) sends a pass to oneDNN, its Winograd way would miss
// them (1.4e-4 on the 160-channel 3x3 case).  So oneDNN runs direct
// kernels unless the caller (onednn_conv_test) pinned an algorithm; set
// before main, ahead of the setting's one read.
const bool kDirectAlgorithm = setenv("LOOM_ONEDNN_ALGORITHM", "direct", /*overwrite=*/0) == 0;

using testing::AllClose;

Tensor pat(int64_t n, int64_t mul, int64_t mod, IntList shape, DType dtype = kFloat64) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * mul) % mod) / mod - 0.5;
  return tensor<double>(v, shape).to(dtype);
}

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// Direct convolution in double: out, and the three gradients for grad_out.
struct Naive {
  std::vector<double> out, gi, gw, gb;
};

Naive naive_conv(const ConvCase& k, const std::vector<double>& x, const std::vector<double>& w,
                 const std::vector<double>& b, const std::vector<double>& go) {
  const int64_t oh_n = out_size(k.h, k.kh, k.sh, k.ph, k.dh);
  const int64_t ow_n = out_size(k.w, k.kw, k.sw, k.pw, k.dw);
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  Naive r;
  r.out.assign(k.n * k.o * oh_n * ow_n, 0.0);
  r.gi.assign(x.size(), 0.0);
  r.gw.assign(w.size(), 0.0);
  r.gb.assign(k.o, 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          const int64_t oi = ((n * k.o + o) * oh_n + oh) * ow_n + ow;
          double acc = k.bias ? b[o] : 0.0;
          r.gb[o] += go[oi];
          const int64_t grp = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = oh * k.sh - k.ph + i * k.dh, iw = ow * k.sw - k.pw + j * k.dw;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                const int64_t xi = ((n * k.c + grp * cg + ci) * k.h + ih) * k.w + iw;
                const int64_t wi = ((o * cg + ci) * k.kh + i) * k.kw + j;
                acc += x[xi] * w[wi];
                r.gi[xi] += go[oi] * w[wi];
                r.gw[wi] += go[oi] * x[xi];
              }
          r.out[oi] = acc;
        }
  return r;
}

TEST(Conv2d, MatchesPyTorchStride2Padding1Groups2) {
  const Tensor x = pat(100, 7, 23, {1, 4, 5, 5}), w = pat(72, 5, 17, {4, 2, 3, 3});
  const Tensor b = tensor<double>({0.1, -0.2, 0.3, -0.4});
  const Tensor y = conv2d(x, w, b, {2, 2}, {1, 1}, {1, 1}, 2);
  EXPECT_EQ(y.sizes(), (IntList{1, 4, 3, 3}));
  const Tensor expected = tensor<double>(
      {0.043734,   0.4324808,  0.341688,   -0.1340153, 0.5258312,  0.2061381,  0.3723785,
       0.0015345,  -0.0470588, -0.0721228, 0.0710997,  -0.4672634, 0.1094629,  -0.2102302,
       -0.6501279, -0.014578,  -0.6092072, -0.2792839, -0.0107417, 0.6657289,  0.3933504,
       0.2910486,  0.5915601,  0.4585678,  0.4074169,  0.4329923,  0.1030691,  0.2445013,
       -0.8411765, -0.3053708, 0.0629156,  -0.8207161, -0.8040921, -0.2925831, -0.855243,
       -0.3232737},
      {1, 4, 3, 3});
  EXPECT_TRUE(AllClose(y, expected, 1e-5, 1e-6));
  // float32 and an unbatched (C, H, W) input give the same values.
  EXPECT_TRUE(AllClose(conv2d(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), {2, 2}, {1, 1},
                              {1, 1}, 2),
                       expected, 1e-5, 1e-6));
  const Tensor unbatched = conv2d(x.reshape({4, 5, 5}), w, b, {2}, {1}, {1}, 2);
  EXPECT_EQ(unbatched.sizes(), (IntList{4, 3, 3}));
  EXPECT_TRUE(AllClose(unbatched, expected.reshape({4, 3, 3}), 1e-5, 1e-6));
}

TEST(Conv2d, MatchesPyTorchDilationAndAsymmetricPadding) {
  const Tensor x = pat(100, 7, 23, {1, 4, 5, 5}), w = pat(72, 5, 17, {4, 2, 3, 3});
  const Tensor y = conv2d(x, w, Tensor(), {1, 1}, {2, 1}, {2, 1}, 2);
  EXPECT_EQ(y.sizes(), (IntList{1, 4, 5, 5}));
  const std::vector<double> first = {0.0716113, 0.2378517, -0.5063939, -0.4859335, 0.6521739,
                                     -0.2506394, -0.4245524, 1.0076726, -0.3836317, -0.2813299};
  const std::vector<double> last = {-0.3554987, 0.6867008, 0.0012788, -0.3017903, 0.2365729,
                                    0.6163683, -0.4757033, -0.455243, 0.9769821, -0.4322251};
  const auto v = y.to_vector<double>();
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(v[i], first[i], 1e-6);
    EXPECT_NEAR(v[90 + i], last[i], 1e-6);
  }
}

// Forward and all three gradients, float32 vs the naive double reference.
TEST(Conv2d, ForwardAndBackwardMatchNaiveAcrossChunkingPaths) {
  const std::vector<ConvCase> cases = {
      // ConvNet-like 5x5 pad 2 with large planes: pixel-split chunks.
      {5, 16, 24, 24, 8, 5, 5, 1, 1, 2, 2, 1, 1, 1, true},
      // Small planes, many images: multi-image chunks in parallel.
      {80, 16, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},
      // Few chunks: the sequential scheme (GEMM split over threads).
      {6, 64, 4, 4, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},
      // 1x1 stride 1: no im2col.
      {4, 24, 9, 9, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},
      // 1x1 stride 1 on small planes (ResNet's last stage): several images
      // copied side by side into one GEMM, parallel and sequential schemes,
      // with groups, and a last chunk of one image.
      {33, 48, 4, 4, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},
      {3, 64, 4, 4, 96, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},
      {5, 12, 3, 5, 8, 1, 1, 1, 1, 0, 0, 1, 1, 2, true},
      {2, 6000, 7, 7, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},
      // 1x1 stride 2 (ResNet downsample), groups, dilation, odd strides.
      {3, 8, 9, 9, 6, 1, 1, 2, 2, 0, 0, 1, 1, 2, false},
      {4, 6, 11, 10, 9, 3, 2, 2, 3, 1, 2, 2, 1, 3, true},
      {2, 1, 28, 28, 16, 5, 5, 1, 1, 2, 2, 1, 1, 1, true},
      // Stride 1 with dilation, groups, asymmetric kernels and padding: the
      // shifted-row (no im2col) path where it is available.
      {3, 8, 12, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, true},
      {2, 4, 10, 14, 8, 3, 5, 1, 1, 1, 2, 1, 1, 1, false},
      {9, 16, 14, 14, 32, 5, 5, 1, 1, 2, 2, 1, 1, 1, true},
      // Stride 1 on a small plane with large weights: im2col, not the
      // shifted rows (which would stream the weights once per image).
      {3, 160, 8, 8, 200, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},
      // Narrow outputs in tall images: index-table im2col over pixel chunks.
      {5, 64, 200, 12, 8, 3, 3, 1, 2, 1, 1, 1, 1, 2, true},
  };
  int index = 0;
  for (const ConvCase& k : cases) {
    Generator gen(index + 10);
    const Tensor x = randn({k.n, k.c, k.h, k.w}, kFloat32, &gen);
    const Tensor w = randn({k.o, k.c / k.groups, k.kh, k.kw}, kFloat32, &gen);
    const Tensor b = k.bias ? randn({k.o}, kFloat32, &gen) : Tensor();
    const Tensor y = conv2d(x, w, b, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
    const Tensor go = randn(y.sizes(), kFloat32, &gen);
    const Naive ref = naive_conv(k, x.to_vector<double>(), w.to_vector<double>(),
                                 k.bias ? b.to_vector<double>() : std::vector<double>(),
                                 go.to_vector<double>());
    EXPECT_TRUE(AllClose(y, tensor<double>(ref.out, y.sizes()), 1e-4, 1e-4)) << "case " << index;
    Tensor gi, gw, gb;
    native::conv2d_backward(go, x, w, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups, true,
                            true, true, gi, gw, gb);
    EXPECT_TRUE(AllClose(gi, tensor<double>(ref.gi, x.sizes()), 1e-4, 1e-3)) << "case " << index;
    EXPECT_TRUE(AllClose(gw, tensor<double>(ref.gw, w.sizes()), 1e-4, 1e-3)) << "case " << index;
    EXPECT_TRUE(AllClose(gb, tensor<double>(ref.gb, {k.o}), 1e-4, 1e-3)) << "case " << index;
    // Only some gradients: the others stay undefined.
    Tensor gi2, gw2, gb2;
    native::conv2d_backward(go, x, w, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups, false,
                            true, false, gi2, gw2, gb2);
    EXPECT_FALSE(gi2.defined());
    EXPECT_FALSE(gb2.defined());
    EXPECT_TRUE(AllClose(gw2, gw, 1e-6, 1e-6));
    ++index;
  }
}

TEST(Conv2d, NonContiguousInputs) {
  Generator gen(5);
  const Tensor x = randn({2, 5, 5, 3}, kFloat64, &gen).permute({0, 3, 1, 2});  // (2, 3, 5, 5)
  const Tensor w = randn({4, 3, 3, 3}, kFloat64, &gen);
  EXPECT_FALSE(x.is_contiguous());
  EXPECT_TRUE(AllClose(conv2d(x, w, Tensor(), {1, 1}, {1, 1}),
                       conv2d(x.contiguous(), w, Tensor(), {1, 1}, {1, 1}), 1e-12, 1e-12));
}

TEST(Conv2d, Errors) {
  const Tensor x = zeros({2, 3, 8, 8});
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 2, 3, 3})), "conv2d", "groups=1", "[4, 2, 3, 3]",
                    "[2, 3, 8, 8]", "to have 2 channels, but got 3 channels");
  EXPECT_LOOM_ERROR(conv2d(zeros({2, 4, 8, 8}), zeros({6, 1, 3, 3}), Tensor(), {1, 1}, {0, 0},
                           {1, 1}, 4),
                    "conv2d", "out_channels", "6", "divisible by groups (4)");
  EXPECT_LOOM_ERROR(conv2d(zeros({2, 3, 4, 4}), zeros({4, 3, 7, 7})), "conv2d",
                    "Kernel size: (7 x 7)", "padded input size per channel: (4 x 4)");
  EXPECT_LOOM_ERROR(conv2d(zeros({2, 3, 4, 4}), zeros({4, 3, 3, 3}), Tensor(), {1, 1}, {0, 0},
                           {2, 2}),
                    "conv2d", "Kernel size: (5 x 5)");
  EXPECT_LOOM_ERROR(conv2d(zeros({3, 8}), zeros({4, 3, 3, 3})), "conv2d", "3-D", "4-D",
                    "[3, 8]");
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 3, 3})), "conv2d", "4-D weight", "[4, 3, 3]");
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 3, 3, 3}), zeros({5})), "conv2d", "bias", "[4]", "[5]");
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 3, 3, 3}, kFloat64)), "conv2d", "same dtype");
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), {0, 1}), "conv2d", "stride");
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 3, 3, 3}).to(Device(kCPU, 1))), "conv2d", "cpu:1");
  EXPECT_LOOM_ERROR(conv2d(x, zeros({4, 0, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 0),
                    "conv2d", "groups");
}

}  // namespace
}  // namespace loom
