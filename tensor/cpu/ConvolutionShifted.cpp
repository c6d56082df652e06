// Stride-1 convolutions without im2col (float32, AVX-512).
//
// Pad each image's planes to (Hp, Wp) and compute the output over the padded
// width: output pixel p' = oh * Wp + ow then reads input p' + ki * Wp + kj
// for kernel tap (ki, kj), so each im2col row is the padded plane shifted by
// a constant and the GEMM reads it in place (Gemm.h, gemm_shifted_*).  The
// Wp - OW extra columns per row are computed and dropped; the dispatch only
// picks this path when that waste is small (<= 1/3), which it is for the
// 3x3/5x5 "same" convolutions of ConvNets and ResNets above 8x8.  Kernels
// larger than 1x1 with more than kCachedWeights weights also need
// kMinWideColumns (wide) output columns per image: each image's product
// streams all of the packed weights, and on small planes with large weights
// (ResNet-50's 256-channel 3x3 convs on 8x8 maps: 2.4 MB of weights for 80
// columns) im2col + one GEMM over several images is faster
// (conv_bench resnet50-stage2, those five convs at batch 4: forward 166 ->
// 128 ms, input grad 205 -> 130 ms, weight grad 199 -> 138 ms; at batch 32
// 161/168/155 -> 139/142/141 ms).  A 1x1 forward on such planes stays here
// (the GEMM path's gather and scatter of several images cost more).
//
//   forward      out' (Og, OH*Wp)  = W_g (Og, CKK) @ shift(xpad)
//   grad_weight  gW_g^T (CKK, Og) += shift(xpad) @ gO'^T (OH*Wp, Og)   (gO' is gO
//                                    widened to Wp with zero columns, transposed)
//   grad_input   gI' (Cg, H*Wq)    = flip(W_g)^T (Cg, Og*kk) @ shift(gO padded by
//                                    d*(k-1)-p): the transposed convolution
#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/Convolution.h"
#include "tensor/cpu/Gemm.h"

namespace loom {
namespace cpu {
namespace {

constexpr int64_t kParallelMacs = 1 << 18;  // below this, one thread
constexpr int64_t kImagesPerPass = 8;       // images per grad_weight product
constexpr int64_t kMinWideColumns = 128;    // per image, see the top
constexpr int64_t kCachedWeights = 256 * 1024;  // floats: half an L2 of 2 MiB

enum Slot { kPadSlot, kOutSlot, kGradPadSlot, kGradWideSlot, kNumSlots };

// Uninitialised per-thread scratch, reused across calls.
float* scratch(Slot slot, int64_t n) {
  thread_local std::unique_ptr<float[]> buffers[kNumSlots];
  thread_local int64_t sizes[kNumSlots] = {};
  if (sizes[slot] < n) {
    buffers[slot].reset(new float[n]);
    sizes[slot] = n;
  }
  return buffers[slot].get();
}

// dst (C, H + 2ph, W + 2pw) = x (C, H, W) with a zero border, then `slack` zeros.
void pad_planes(const float* x, int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw,
                float* dst, int64_t slack) {
  const int64_t wp = W + 2 * pw, hp = H + 2 * ph;
  for (int64_t c = 0; c < C; ++c) {
    float* plane = dst + c * hp * wp;
    std::fill(plane, plane + ph * wp, 0.f);
    for (int64_t h = 0; h < H; ++h) {
      float* row = plane + (h + ph) * wp;
      std::fill(row, row + pw, 0.f);
      std::copy(x + (c * H + h) * W, x + (c * H + h + 1) * W, row + pw);
      std::fill(row + pw + W, row + wp, 0.f);
    }
    std::fill(plane + (H + ph) * wp, plane + hp * wp, 0.f);
  }
  std::fill(dst + C * hp * wp, dst + C * hp * wp + slack, 0.f);
}

// out (R, OH, OW) = the first OW columns of each wide row of wide (R, OH * wp),
// plus bias[r] when given.
void narrow_rows(const float* wide, int64_t R, int64_t OH, int64_t OW, int64_t wp,
                 const float* bias, float* out) {
  for (int64_t r = 0; r < R; ++r) {
    const float b = bias ? bias[r] : 0.f;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* s = wide + (r * OH + oh) * wp;
      float* d = out + (r * OH + oh) * OW;
#pragma omp simd
      for (int64_t ow = 0; ow < OW; ++ow) d[ow] = s[ow] + b;
    }
  }
}

// Offsets of the shifted rows (c, ki, kj) within padded planes (C, hp, wp).
std::vector<int64_t> shift_offsets(int64_t C, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                   int64_t hp, int64_t wp) {
  std::vector<int64_t> off(C * kh * kw);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ki = 0; ki < kh; ++ki)
      for (int64_t kj = 0; kj < kw; ++kj)
        off[(c * kh + ki) * kw + kj] = c * hp * wp + ki * dh * wp + kj * dw;
  return off;
}

int64_t panels8(int64_t m) { return (m + 7) / 8 * 8; }

// Runs fn(n0, n1) over the images, on one thread for small problems.
template <typename Fn>
void for_images(const ConvGeometry& g, int64_t grain, const Fn& fn) {
  const int64_t macs = g.batch * g.out_channels * g.out_h * g.out_w * (g.in_channels / g.groups) *
                       g.kernel_h * g.kernel_w;
  if (macs < kParallelMacs) {
    fn(int64_t{0}, g.batch);
  } else {
    parallel_for(0, g.batch, grain, fn);
  }
}

}  // namespace

bool shifted_forward_ok(const ConvGeometry& g) {
  if (!shifted_kernels_available() || g.stride_h != 1 || g.stride_w != 1) return false;
  const int64_t wp = g.width + 2 * g.pad_w;
  const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1;
  const int64_t weights = g.out_channels / g.groups * (g.in_channels / g.groups) * g.kernel_h *
                          g.kernel_w;
  const bool streamed = !pointwise && weights > kCachedWeights;
  return 3 * wp <= 4 * g.out_w && g.out_h * wp >= (streamed ? kMinWideColumns : 64);
}

bool shifted_backward_ok(const ConvGeometry& g, bool need_input) {
  if (!shifted_forward_ok(g)) return false;
  // A 1x1 unpadded convolution's gradients are plain GEMMs of grad_out and
  // the input in their own layouts (Convolution.cpp); here grad_weight would
  // first transpose grad_out image by image, which made it 1.5-3x slower
  // than the forward (conv_bench resnet50-stage1).
  if (g.kernel_h == 1 && g.kernel_w == 1 && g.pad_h == 0 && g.pad_w == 0) return false;
  if (!need_input) return true;
  const int64_t qh = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  const int64_t qw = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  if (qh < 0 || qw < 0) return false;
  const int64_t wq = g.out_w + 2 * qw;
  return 3 * wq <= 4 * g.width && g.height * wq >= 64;
}

void conv2d_forward_shifted(const ConvGeometry& g, const float* input, const float* weight,
                            const float* bias, float* out) {
  const int64_t cg = g.in_channels / g.groups, og = g.out_channels / g.groups;
  const int64_t ckk = cg * g.kernel_h * g.kernel_w, hw = g.height * g.width;
  const int64_t hp = g.height + 2 * g.pad_h, wp = g.width + 2 * g.pad_w;
  const int64_t wide = g.out_h * wp, ohw = g.out_h * g.out_w;
  const int64_t slack = (g.kernel_w - 1) * g.dilation_w + 64;
  const std::vector<int64_t> off =
      shift_offsets(cg, g.kernel_h, g.kernel_w, g.dilation_h, g.dilation_w, hp, wp);
  // W_g packed once, shared by the threads.
  std::vector<float> packed(g.groups * panels8(og) * ckk);
  for (int64_t grp = 0; grp < g.groups; ++grp)
    pack_rows8(false, og, ckk, weight + grp * og * ckk, ckk,
               packed.data() + grp * panels8(og) * ckk);
  for_images(g, 1, [&](int64_t n0, int64_t n1) {
    float* xpad = scratch(kPadSlot, cg * hp * wp + slack);  // (Cg, hp, wp)
    float* tmp = scratch(kOutSlot, og * wide);              // (Og, OH * wp)
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        pad_planes(input + (n * g.in_channels + grp * cg) * hw, cg, g.height, g.width, g.pad_h,
                   g.pad_w, xpad, slack);
        gemm_shifted_b(og, wide, ckk, packed.data() + grp * panels8(og) * ckk, xpad, off.data(),
                       tmp, wide, false);
        narrow_rows(tmp, og, g.out_h, g.out_w, wp, bias ? bias + grp * og : nullptr,
                    out + (n * g.out_channels + grp * og) * ohw);
      }
  });
}

void conv2d_backward_shifted(const ConvGeometry& g, const float* input, const float* weight,
                             const float* grad_out, float* grad_input, float* grad_weight,
                             float* grad_bias) {
  const int64_t O = g.out_channels, cg = g.in_channels / g.groups, og = O / g.groups;
  const int64_t kk = g.kernel_h * g.kernel_w, ckk = cg * kk, hw = g.height * g.width;
  const int64_t hp = g.height + 2 * g.pad_h, wp = g.width + 2 * g.pad_w;
  const int64_t wide = g.out_h * wp, ohw = g.out_h * g.out_w;
  const int64_t slack = (g.kernel_w - 1) * g.dilation_w + 64;
  const int64_t pad_size = cg * hp * wp + slack;
  const std::vector<int64_t> off =
      shift_offsets(cg, g.kernel_h, g.kernel_w, g.dilation_h, g.dilation_w, hp, wp);
  // The transposed convolution for grad_input: gO padded by q = d * (k - 1) - p,
  // weights flipped and transposed to (Cg, Og * kh * kw).
  const int64_t qh = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  const int64_t qw = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  const int64_t hq = g.out_h + 2 * qh, wq = g.out_w + 2 * qw, wide_q = g.height * wq;
  const int64_t okk = og * kk;
  std::vector<int64_t> off_q;
  std::vector<float> packed_t;
  if (grad_input != nullptr) {
    off_q = shift_offsets(og, g.kernel_h, g.kernel_w, g.dilation_h, g.dilation_w, hq, wq);
    packed_t.resize(g.groups * panels8(cg) * okk);
    std::vector<float> wt(cg * okk);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t o = 0; o < og; ++o)
          for (int64_t ki = 0; ki < g.kernel_h; ++ki)
            for (int64_t kj = 0; kj < g.kernel_w; ++kj)
              wt[c * okk + (o * g.kernel_h + ki) * g.kernel_w + kj] =
                  weight[(((grp * og + o) * cg + c) * g.kernel_h + (g.kernel_h - 1 - ki)) *
                             g.kernel_w +
                         (g.kernel_w - 1 - kj)];
      pack_rows8(false, cg, okk, wt.data(), okk, packed_t.data() + grp * panels8(cg) * okk);
    }
  }
  if (grad_weight != nullptr) std::fill(grad_weight, grad_weight + O * ckk, 0.f);
  if (grad_bias != nullptr) std::fill(grad_bias, grad_bias + O, 0.f);
  std::mutex merge;
  for_images(g, kImagesPerPass, [&](int64_t n0, int64_t n1) {
    // Per-thread sums: grad_weight transposed per group (CKK, Og), grad_bias.
    std::vector<float> gwt(grad_weight ? O * ckk : 0, 0.f), gb(grad_bias ? O : 0, 0.f);
    float* pads = scratch(kPadSlot, kImagesPerPass * pad_size);        // per image (Cg, hp, wp)
    float* wides = scratch(kGradWideSlot, kImagesPerPass * wide * og);  // per image (OH*wp, Og)
    float* gq = scratch(kGradPadSlot, og * hq * wq + slack + 64);      // (Og, hq, wq)
    float* tmp = scratch(kOutSlot, cg * wide_q);                         // (Cg, H * wq)
    const float* a_seg[kImagesPerPass];
    const float* b_seg[kImagesPerPass];
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t b0 = n0; b0 < n1; b0 += kImagesPerPass) {
        const int64_t count = std::min(kImagesPerPass, n1 - b0);
        for (int64_t i = 0; i < count; ++i) {
          const int64_t n = b0 + i;
          const float* go = grad_out + (n * O + grp * og) * ohw;  // (Og, OH, OW)
          if (grad_bias)
            for (int64_t o = 0; o < og; ++o) {
              const float* row = go + o * ohw;
              float s = 0.f;
#pragma omp simd reduction(+ : s)
              for (int64_t p = 0; p < ohw; ++p) s += row[p];
              gb[grp * og + o] += s;
            }
          if (grad_weight) {
            float* xp = pads + i * pad_size;
            pad_planes(input + (n * g.in_channels + grp * cg) * hw, cg, g.height, g.width,
                       g.pad_h, g.pad_w, xp, slack);
            float* got = wides + i * wide * og;  // (OH*wp, Og): gO transposed, zero extra rows
            for (int64_t oh = 0; oh < g.out_h; ++oh) {
              for (int64_t ow = 0; ow < g.out_w; ++ow)
                for (int64_t o = 0; o < og; ++o)
                  got[(oh * wp + ow) * og + o] = go[(o * g.out_h + oh) * g.out_w + ow];
              std::fill(got + (oh * wp + g.out_w) * og, got + (oh + 1) * wp * og, 0.f);
            }
            a_seg[i] = xp;
            b_seg[i] = got;
          }
          if (grad_input) {
            pad_planes(go, og, g.out_h, g.out_w, qh, qw, gq, slack + 64);
            gemm_shifted_b(cg, wide_q, okk, packed_t.data() + grp * panels8(cg) * okk, gq,
                           off_q.data(), tmp, wide_q, false);
            narrow_rows(tmp, cg, g.height, g.width, wq, nullptr,
                        grad_input + (n * g.in_channels + grp * cg) * hw);
          }
        }
        if (grad_weight)
          gemm_shifted_a(ckk, og, wide, count, a_seg, off.data(), b_seg, og,
                         gwt.data() + grp * ckk * og, og);
      }
    std::lock_guard<std::mutex> lock(merge);
    if (grad_weight)
      for (int64_t grp = 0; grp < g.groups; ++grp)
        for (int64_t o = 0; o < og; ++o)
          for (int64_t k = 0; k < ckk; ++k)
            grad_weight[(grp * og + o) * ckk + k] += gwt[(grp * ckk + k) * og + o];
    for (size_t i = 0; i < gb.size(); ++i) grad_bias[i] += gb[i];
  });
}

}  // namespace cpu
}  // namespace loom
