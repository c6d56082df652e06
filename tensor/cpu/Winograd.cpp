// Winograd F(2x2, 3x3) convolution; see Winograd.h.
#include "tensor/cpu/Winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/WeightReuse.h"
#include "tensor/cpu/Gemm.h"
#include "tensor/cpu/KeptWeightCopies.h"

namespace loom {
namespace cpu {
namespace {

using native::ConvGeometry;

constexpr int kPoints = 16;  // 4x4 transformed tile
// Tiles per round of products: bounds the transformed inputs and products
// (16 x channels x tiles floats each) for large images and batches.
constexpr int64_t kTilesPerRound = 512;

// ---- transformed weights -----------------------------------------------------------

// The filters of one product set: out x in channels, as 16 matrices packed
// for gemm_shifted_b (pack_rows8 panels), one after the other.
int64_t packed_floats(int64_t out_channels, int64_t in_channels) {
  return (out_channels + 7) / 8 * 8 * in_channels;
}

// Which pass's transform a kept copy holds.
enum class Pass { kForward, kBackwardData };

// Transformed weights kept under WeightReuse, per weight tensor, version
// and pass, at most 512 MiB.
using KeptTransforms = KeptWeightCopies<Pass>;

KeptTransforms& kept_transforms() {
  // Never destroyed: convolutions may run at exit.
  static KeptTransforms* k = new KeptTransforms(int64_t(512) << 20);
  return *k;
}

// prepare_kept_weights (tensor/WeightReuse.h) makes the transforms of
// changed weights ahead of their passes.
int prepare_kept_transforms(Device device) { return kept_transforms().refresh(device); }
const bool kPreparerRegistered =
    (detail::register_kept_weight_preparer(&prepare_kept_transforms), true);

// The pass's transformed weights: kept ones if WeightReuse promised the
// weights unchanged since, else made by `make` (and kept under WeightReuse,
// with `make` to make them again for a later version).
Tensor weights_for(const onednn::WeightVersion& id, const void* data, Pass pass,
                   const KeptTransforms::Make& make) {
  if (id.counter == nullptr) return make();
  if (Tensor kept = kept_transforms().find(id, data, pass); kept.defined()) {
    detail::count_weight_reuse(true);
    return kept;
  }
  Tensor packed = make();
  kept_transforms().keep(id, data, pass, packed, make);
  detail::count_weight_reuse(false);
  return packed;
}

// ---- the convolution ------------------------------------------------------------------

// y (batch, out, out_h, out_w) = the convolution of x (batch, in, height,
// width) padded by (pad_h, pad_w) with the filters behind `u` (transformed
// and packed: transform_weights), + bias.
struct Problem {
  int64_t batch, in, height, width, out, out_h, out_w, pad_h, pad_w;
};

// One round of tiles: `images` whole images from image n0.  Tile t is
// image t / per_image, tile row (t % per_image) / tiles_w, column t % tiles_w.
struct Round {
  int64_t n0, images, tiles;
  int64_t tiles_h, tiles_w, per_image;
  int64_t plane_h, plane_w;  // a zero-padded input plane: 2 more than the tiles cover
};

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")

__mmask16 lanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : static_cast<__mmask16>((1u << count) - 1u);
}

// The 16 product matrices' filters U_p (rows x cols), each packed for
// gemm_shifted_b in pack_rows8's panels (8 rows interleaved, the last panel
// zero-padded), one after the other: U_p[r][q] = (G g G^T)[p] with
// G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1] and g the 3x3 filter from input
// channel q to output channel r of the pass.  The forward's filters are w's
// (out, in) filters; the input gradient's are w's (in, out) ones turned by
// 180 degrees.
Tensor transform_weights(const float* w, int64_t w_out, int64_t w_in, bool backward) {
  const int64_t rows = backward ? w_in : w_out, cols = backward ? w_out : w_in;
  const int64_t per_point = packed_floats(rows, cols);
  Tensor packed = empty({kPoints * per_point}, kFloat32);
  float* dst = packed.data_ptr<float>();
  // Filter (r, q) starts at w + r * r_stride + q * q_stride; tap e of the
  // pass's filter is tap tap_of[e] of w's.
  const int64_t r_stride = backward ? 9 : w_in * 9, q_stride = backward ? w_in * 9 : 9;
  int tap_of[9];
  for (int e = 0; e < 9; ++e) tap_of[e] = backward ? 8 - e : e;
  // Sixteen filters at a time, the lanes of one panel line: lane l is row
  // r0 + l % 8 and column q + l / 8, as pack_rows8 interleaves them, so
  // every point's 16 values are one whole line of the packed copy.
  alignas(64) int32_t offsets[16];
  for (int l = 0; l < 16; ++l)
    offsets[l] = static_cast<int32_t>((l % 8) * r_stride + (l / 8) * q_stride);
  const __m512i gather_idx = _mm512_load_si512(offsets);
  const __m512 half = _mm512_set1_ps(0.5f);
  // The input gradient's filters of one column are a row of w: the rows a
  // few columns ahead are fetched early, as nothing else would.
  constexpr int64_t kFetchAhead = 16;
  parallel_for(0, (rows + 7) / 8, 1, [&](int64_t panel0, int64_t panel1) {
    for (int64_t panel = panel0; panel < panel1; ++panel) {
      const int64_t r0 = panel * 8;
      // Lanes of rows past `rows` (the last panel's padding) stay zero.
      const __mmask16 row_lanes =
          r0 + 8 <= rows ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>(((1u << (rows - r0)) - 1u) * 0x0101u);
      float* line = dst + panel * 8 * cols;
      for (int64_t q = 0; q < cols; q += 2, line += 16) {
        const __mmask16 mask =
            q + 1 < cols ? row_lanes : static_cast<__mmask16>(row_lanes & 0x00FF);
        if (backward && q + kFetchAhead + 1 < cols) {
          for (int64_t c = 0; c < 2; ++c) {
            const char* ahead = reinterpret_cast<const char*>(
                w + r0 * r_stride + (q + kFetchAhead + c) * q_stride);
            for (int b = 0; b < 8 * 9 * 4; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
          }
        }
        const float* filters = w + r0 * r_stride + q * q_stride;
        __m512 g[9];
        for (int e = 0; e < 9; ++e)
          g[e] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, gather_idx,
                                          filters + tap_of[e], 4);
        // G g: 4 rows of 3.
        __m512 t[4][3];
        for (int j = 0; j < 3; ++j) {
          t[0][j] = g[j];
          t[1][j] = _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(g[j], g[3 + j]), g[6 + j]));
          t[2][j] = _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(g[j], g[3 + j]), g[6 + j]));
          t[3][j] = g[6 + j];
        }
        // (G g) G^T: 4 x 4, each point's line stored whole.
        for (int i = 0; i < 4; ++i) {
          const __m512 u[4] = {
              t[i][0],
              _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(t[i][0], t[i][1]), t[i][2])),
              _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(t[i][0], t[i][1]), t[i][2])),
              t[i][2]};
          for (int j = 0; j < 4; ++j) {
            float* at = line + (4 * i + j) * per_point;
            if (q + 1 < cols)
              _mm512_storeu_ps(at, u[j]);
            else
              _mm512_mask_storeu_ps(at, 0x00FF, u[j]);  // the low 8 lanes
          }
        }
      }
    }
  });
  return packed;
}

// V[p][c][t] = (B^T d B)[p] for tile t's 4x4 input patch d of channel c,
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].  Sixteen tiles at a time:
// one vector per patch element gathered from the round's padded planes,
// one vector store per point.
void transform_inputs(const Problem& s, const Round& r, const float* x, float* v) {
  const int64_t plane = r.plane_h * r.plane_w;
  std::vector<int32_t> origin(static_cast<size_t>((r.tiles + 15) / 16 * 16), 0);
  for (int64_t t = 0; t < r.tiles; ++t) {
    const int64_t n = t / r.per_image, th = t % r.per_image / r.tiles_w, tw = t % r.tiles_w;
    origin[t] = static_cast<int32_t>(n * plane + 2 * th * r.plane_w + 2 * tw);
  }
  const int64_t point_stride = s.in * r.tiles;
  parallel_for(0, s.in, 1, [&](int64_t c0, int64_t c1) {
    // The round's planes of one channel; the borders stay zero.
    std::vector<float> planes(static_cast<size_t>(r.images * plane), 0.f);
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t n = 0; n < r.images; ++n) {
        const float* src = x + ((r.n0 + n) * s.in + c) * s.height * s.width;
        float* dst = planes.data() + n * plane + s.pad_h * r.plane_w + s.pad_w;
        for (int64_t row = 0; row < s.height; ++row)
          std::copy(src + row * s.width, src + (row + 1) * s.width, dst + row * r.plane_w);
      }
      float* out = v + c * r.tiles;
      for (int64_t t0 = 0; t0 < r.tiles; t0 += 16) {
        const __mmask16 mask = lanes(r.tiles - t0);
        const __m512i idx = _mm512_loadu_si512(origin.data() + t0);
        __m512 d[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j)
            d[i][j] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, idx,
                                               planes.data() + i * r.plane_w + j, 4);
        __m512 t[4][4];
        for (int j = 0; j < 4; ++j) {
          t[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
          t[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
          t[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
          t[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
        }
        for (int i = 0; i < 4; ++i) {
          float* row = out + 4 * i * point_stride + t0;
          _mm512_mask_storeu_ps(row, mask, _mm512_sub_ps(t[i][0], t[i][2]));
          _mm512_mask_storeu_ps(row + point_stride, mask, _mm512_add_ps(t[i][1], t[i][2]));
          _mm512_mask_storeu_ps(row + 2 * point_stride, mask, _mm512_sub_ps(t[i][2], t[i][1]));
          _mm512_mask_storeu_ps(row + 3 * point_stride, mask, _mm512_sub_ps(t[i][1], t[i][3]));
        }
      }
    }
  });
}

// y's 2x2 blocks = A^T m A + bias, m tile t's 16 products M[p][o][t],
// A^T = [1 1 1 0; 0 1 -1 -1].  Sixteen tiles at a time, scattered into y
// (blocks cut by an odd output size write only their inside).
void transform_products(const Problem& s, const Round& r, const float* m, const float* bias,
                        float* y) {
  const int64_t image = s.out * s.out_h * s.out_w;
  const int64_t padded = (r.tiles + 15) / 16 * 16;
  std::vector<int32_t> origin(static_cast<size_t>(padded), 0), right(padded, 0), below(padded, 0);
  for (int64_t t = 0; t < r.tiles; ++t) {
    const int64_t n = t / r.per_image, th = t % r.per_image / r.tiles_w, tw = t % r.tiles_w;
    origin[t] = static_cast<int32_t>(n * image + 2 * th * s.out_w + 2 * tw);
    right[t] = 2 * tw + 1 < s.out_w;
    below[t] = 2 * th + 1 < s.out_h;
  }
  const int64_t point_stride = s.out * r.tiles;
  float* y0 = y + r.n0 * image;
  parallel_for(0, s.out, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const __m512 b = _mm512_set1_ps(bias != nullptr ? bias[o] : 0.f);
      const float* src = m + o * r.tiles;
      float* dst = y0 + o * s.out_h * s.out_w;
      for (int64_t t0 = 0; t0 < r.tiles; t0 += 16) {
        const __mmask16 mask = lanes(r.tiles - t0);
        __m512 p[16];
        for (int k = 0; k < 16; ++k)
          p[k] = _mm512_maskz_loadu_ps(mask, src + k * point_stride + t0);
        __m512 t[2][4];
        for (int j = 0; j < 4; ++j) {
          t[0][j] = _mm512_add_ps(_mm512_add_ps(p[j], p[4 + j]), p[8 + j]);
          t[1][j] = _mm512_sub_ps(_mm512_sub_ps(p[4 + j], p[8 + j]), p[12 + j]);
        }
        const __m512i idx = _mm512_loadu_si512(origin.data() + t0);
        const __mmask16 has_right =
            mask & _mm512_test_epi32_mask(_mm512_loadu_si512(right.data() + t0),
                                          _mm512_set1_epi32(1));
        const __mmask16 has_below =
            mask & _mm512_test_epi32_mask(_mm512_loadu_si512(below.data() + t0),
                                          _mm512_set1_epi32(1));
        for (int i = 0; i < 2; ++i) {
          const __m512 left =
              _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(t[i][0], t[i][1]), t[i][2]), b);
          const __m512 second =
              _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(t[i][1], t[i][2]), t[i][3]), b);
          const __mmask16 row = i == 0 ? mask : has_below;
          float* at = dst + i * s.out_w;
          _mm512_mask_i32scatter_ps(at, row, idx, left, 4);
          _mm512_mask_i32scatter_ps(at + 1, row & has_right, idx, second, 4);
        }
      }
    }
  });
}

#pragma GCC pop_options

void convolve(const Problem& s, const float* x, const float* u, const float* bias, float* y) {
  Round r;
  r.tiles_h = (s.out_h + 1) / 2;
  r.tiles_w = (s.out_w + 1) / 2;
  r.per_image = r.tiles_h * r.tiles_w;
  r.plane_h = 2 * r.tiles_h + 2;
  r.plane_w = 2 * r.tiles_w + 2;
  const int64_t images_per_round = std::max<int64_t>(1, kTilesPerRound / r.per_image);
  const int64_t per_point = packed_floats(s.out, s.in);
  std::vector<int64_t> row_offsets;
  for (r.n0 = 0; r.n0 < s.batch; r.n0 += images_per_round) {
    r.images = std::min(images_per_round, s.batch - r.n0);
    r.tiles = r.images * r.per_image;
    // gemm_shifted_b reads 32 floats past each row of V.
    Tensor v_buf = empty({kPoints * s.in * r.tiles + 32}, kFloat32);
    Tensor m_buf = empty({kPoints * s.out * r.tiles}, kFloat32);
    float* v = v_buf.data_ptr<float>();
    float* m = m_buf.data_ptr<float>();
    std::fill(v + kPoints * s.in * r.tiles, v + kPoints * s.in * r.tiles + 32, 0.f);
    transform_inputs(s, r, x, v);
    // M_p = U_p V_p, 16 products.
    row_offsets.resize(static_cast<size_t>(s.in));
    for (int64_t c = 0; c < s.in; ++c) row_offsets[c] = c * r.tiles;
    parallel_for(0, kPoints, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        gemm_shifted_b(s.out, r.tiles, s.in, u + p * per_point, v + p * s.in * r.tiles,
                       row_offsets.data(), m + p * s.out * r.tiles, r.tiles, false);
    });
    transform_products(s, r, m, bias, y);
  }
}

bool enabled() {
  // LOOM_ONEDNN_ALGORITHM=direct asks for direct kernels only (bitwise
  // repeatable): loom's Winograd stays off too.
  static const bool on = onednn::conv_algorithm() != "direct";
  return on;
}

}  // namespace

bool winograd_applies(const ConvGeometry& g) {
  return !g.channels_last && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 &&
         g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 && g.groups == 1 &&
         g.pad_h >= 0 && g.pad_h <= 2 && g.pad_w >= 0 && g.pad_w <= 2 && g.in_channels >= 16 &&
         g.out_channels >= 16 && g.out_h >= 1 && g.out_w >= 1 && shifted_kernels_available() &&
         enabled();
}

namespace {

// One pass: the forward (src = x, dst = y) or the input gradient (src =
// grad_y, dst = grad_x; with stride 1 that is the convolution of grad_y,
// padded by 2 - pad, with each filter turned by 180 degrees and in and out
// channels swapped).
void run_pass(Pass pass, const ConvGeometry& g, const float* w, const float* src,
              const float* bias, float* dst, const onednn::WeightVersion& weights) {
  LOOM_CHECK(winograd_applies(g), pass == Pass::kForward ? "conv2d" : "conv2d_backward",
             ": Winograd F(2x2, 3x3) does not apply to this convolution");
  const bool backward = pass == Pass::kBackwardData;
  const int64_t out = g.out_channels, in = g.in_channels;
  const Tensor u = weights_for(weights, w, pass, [w, out, in, backward] {
    return transform_weights(w, out, in, backward);
  });
  const Problem forward{g.batch, g.in_channels, g.height, g.width, g.out_channels,
                        g.out_h, g.out_w, g.pad_h, g.pad_w};
  const Problem input_gradient{g.batch, g.out_channels, g.out_h, g.out_w, g.in_channels,
                               g.height, g.width, 2 - g.pad_h, 2 - g.pad_w};
  convolve(backward ? input_gradient : forward, src, u.data_ptr<float>(), bias, dst);
}

}  // namespace

void winograd_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                      float* y, const onednn::WeightVersion& weights) {
  run_pass(Pass::kForward, g, w, x, bias, y, weights);
}

void winograd_backward_data(const ConvGeometry& g, const float* w, const float* grad_y,
                            float* grad_x, const onednn::WeightVersion& weights) {
  run_pass(Pass::kBackwardData, g, w, grad_y, nullptr, grad_x, weights);
}

}  // namespace cpu
}  // namespace loom
