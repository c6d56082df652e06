// im2col + GEMM convolution, forward and backward; see Convolution.h for the
// chunking scheme.  Per group g (Og = O / groups output channels, Cg input
// channels, CKK = Cg * kh * kw):
//
//   forward      out[:, chunk] (Og, P)  = W_g (Og, CKK) @ col (CKK, P)
//   grad_weight  gW_g (Og, CKK)        += gO[:, chunk] (Og, P) @ col^T (P, CKK)
//   grad_input   colg (CKK, P)          = W_g^T (CKK, Og) @ gO[:, chunk] (Og, P)
//                gI                    += col2im(colg)
//
// where P is the chunk's pixel count.  A stride-1, unpadded 1x1 convolution
// skips im2col: the input plane already is the column matrix.
#include "tensor/cpu/Convolution.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/Factory.h"
#include "tensor/TensorImpl.h"
#include "tensor/WeightReuse.h"
#include "tensor/cpu/KeptWeightCopies.h"
#include "tensor/cpu/Gemm.h"
#include "tensor/cpu/ConvChoice.h"
#include "tensor/cpu/Winograd.h"
#include "tensor/native/Convolution.h"

namespace loom {
namespace cpu {
namespace {

// Elements of one thread's im2col buffer in the parallel scheme (~L2/3).
constexpr int64_t kColBudget = 160 * 1024;
// ... and of the single shared buffer when chunks run one at a time.
constexpr int64_t kSequentialColBudget = 4 * 1024 * 1024;
// Below this many multiply-adds a convolution stays on one thread.
constexpr int64_t kParallelMacs = 1 << 18;
// A 1x1 stride-1 convolution multiplies each image's plane in place when it
// has at least this many pixels.  Smaller planes (ResNet's last stage: 4x4,
// 7x7) are copied side by side into one column matrix, so one GEMM covers
// several images: per image, the weights would be packed for only a few
// columns and, for grad_weight, the weight-sized result read and written
// once per image.
constexpr int64_t kIdentityDirectPixels = 128;

template <typename T>
T sum_row(const T* x, int64_t n) {
  T acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += x[i + l];
  T s = 0;
  for (; i < n; ++i) s += x[i];
  for (int l = 0; l < 16; ++l) s += acc[l];
  return s;
}

// Short contiguous runs (one output row, often < 32 values): the inner work
// of im2col / col2im.  Inline vector code with a masked tail instead of
// memcpy/memset calls, whose call overhead dominates at these lengths.
template <typename T>
inline void zero_run(T* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = T(0);
}
template <typename T>
inline void copy_run(T* d, const T* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = s[i];
}
template <typename T>
inline void add_run(T* d, const T* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] += s[i];
}

// float runs: 8 lanes, then 4, then single values (AVX2 masked stores are
// slow, and these runs are often 2..16 values long).
template <>
inline void zero_run<float>(float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_setzero_ps());
  if (i + 4 <= n) _mm_storeu_ps(d + i, _mm_setzero_ps()), i += 4;
  for (; i < n; ++i) d[i] = 0.f;
}
template <>
inline void copy_run<float>(float* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
  if (i + 4 <= n) _mm_storeu_ps(d + i, _mm_loadu_ps(s + i)), i += 4;
  for (; i < n; ++i) d[i] = s[i];
}
template <>
inline void add_run<float>(float* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(d + i), _mm256_loadu_ps(s + i)));
  if (i + 4 <= n) _mm_storeu_ps(d + i, _mm_add_ps(_mm_loadu_ps(d + i), _mm_loadu_ps(s + i))), i += 4;
  for (; i < n; ++i) d[i] += s[i];
}

// d[i] = s[2 * i]: even elements, 8 per step (reads up to s[2 * n + 14]).
template <typename T>
inline void copy_even_run(T* d, const T* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = s[2 * i];
}
template <>
inline void copy_even_run<float>(float* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 even = _mm256_shuffle_ps(_mm256_loadu_ps(s + 2 * i), _mm256_loadu_ps(s + 2 * i + 8), 0x88);
    _mm256_storeu_ps(d + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8)));
  }
  for (; i < n; ++i) d[i] = s[2 * i];
}

// d[q] = s[idx[q]] (an im2col row of small images, through an index table).
template <typename T>
inline void gather_run(T* d, const T* s, const int32_t* idx, int64_t n) {
  for (int64_t q = 0; q < n; ++q) d[q] = s[idx[q]];
}
template <>
inline void gather_run<float>(float* d, const float* s, const int32_t* idx, int64_t n) {
  int64_t q = 0;
  for (; q + 8 <= n; q += 8)
    _mm256_storeu_ps(d + q, _mm256_i32gather_ps(
                                s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + q)), 4));
  for (; q < n; ++q) d[q] = s[idx[q]];
}

// Uninitialised scratch memory kept per thread and reused across calls
// (fresh large allocations would page-fault on every convolution).
enum ScratchSlot {
  kColSlot,
  kColGradSlot,
  kRowsSlot,
  kPadSlot,
  kPadGradSlot,
  kChunkPadSlot,
  kChunkGradSlot,
  kNumSlots
};
template <typename T>
T* scratch(ScratchSlot slot, int64_t n) {
  thread_local std::unique_ptr<T[]> buffers[kNumSlots];
  thread_local int64_t sizes[kNumSlots] = {};
  if (sizes[slot] < n) {
    buffers[slot].reset(new T[n]);
    sizes[slot] = n;
  }
  return buffers[slot].get();
}

// One chunk of output pixels: images [n0, n1) and, within each, pixels
// [p0, p1) (a partial range only when n1 == n0 + 1).
struct Chunk {
  int64_t n0, n1, p0, p1;
  int64_t images() const { return n1 - n0; }
  int64_t cols() const { return (n1 - n0) * (p1 - p0); }
};

template <typename T>
class ConvRunner {
 public:
  explicit ConvRunner(const ConvGeometry& g) : g_(g) {
    cg_ = g.in_channels / g.groups;
    og_ = g.out_channels / g.groups;
    kk_ = g.kernel_h * g.kernel_w;
    ckk_ = cg_ * kk_;
    hw_ = g.height * g.width;
    ohw_ = g.out_h * g.out_w;
    identity_ = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                g.pad_h == 0 && g.pad_w == 0;
    // Narrow outputs: row-by-row copies would be runs of a few values, so
    // im2col gathers through an index table instead.
    table_ = g.out_w < 16 &&
             static_cast<int64_t>(g.batch) * g.in_channels * padded_h() * padded_w() < (1 << 30);
  }

  // Calls fn(chunk, inner_parallel, state) for every chunk; chunks of one
  // image always go to the same thread.  Each thread (or the single caller)
  // makes its state with begin(max_chunk_cols, several_threads) and hands it
  // to end(state) when done (for per-thread accumulators).
  template <typename Begin, typename Fn, typename End>
  void for_each_chunk(const Begin& begin, const Fn& fn, const End& end) const {
    // Small convolutions run on the calling thread: waking the pool costs more.
    const int64_t macs = g_.batch * g_.out_channels * ohw_ * ckk_;
    const int64_t threads = macs < kParallelMacs ? 1 : get_num_threads();
    int64_t images, pixels;
    plan(kColBudget, images, pixels);
    const int64_t units = (g_.batch + images - 1) / images;
    // Each chunk repacks the weights for its GEMM: worth it only when the
    // chunk has enough columns to amortise that (else split each GEMM).
    const int64_t chunk_cols = std::min(images, g_.batch) * pixels;
    if (threads > 1 && units >= 2 * threads && chunk_cols >= 256) {
      parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
        auto state = begin(std::min(images, g_.batch) * pixels, true);
        for (int64_t u = u0; u < u1; ++u)
          unit_chunks(u, images, pixels, [&](const Chunk& c) { fn(c, false, state); });
        end(state);
      });
      return;
    }
    plan(kSequentialColBudget, images, pixels);
    auto state = begin(std::min(images, g_.batch) * pixels, false);
    for (int64_t u = 0; u * images < g_.batch; ++u)
      unit_chunks(u, images, pixels, [&](const Chunk& c) { fn(c, threads > 1, state); });
    end(state);
  }

  // col (CKK, chunk.cols()) for group `group`, images laid side by side.
  void im2col(const T* input, const Chunk& c, int64_t group, T* col, bool parallel) const {
    const int64_t ld = c.cols(), span = c.p1 - c.p0;
    if (identity_) {  // each channel's pixels are one run
      over(parallel, c.n0, c.n1, [&](int64_t n) {
        const T* x = input + (n * g_.in_channels + group * cg_) * hw_ + c.p0;
        T* d = col + (n - c.n0) * span;
        for (int64_t ch = 0; ch < cg_; ++ch) copy_run(d + ch * ld, x + ch * hw_, span);
      });
      return;
    }
    if (table_) {
      // Pad the chunk's images, then gather every row through one index table.
      const int64_t plane = padded_h() * padded_w(), img = cg_ * plane;
      T* pad = scratch<T>(kChunkPadSlot, c.images() * img);
      over(parallel, c.n0, c.n1, [&](int64_t n) {
        pad_into(input + (n * g_.in_channels + group * cg_) * hw_, pad + (n - c.n0) * img);
      });
      const std::vector<int32_t>& idx = index_table(c);
      over(parallel, 0, cg_, [&](int64_t ch) {
        for (int64_t k = 0; k < kk_; ++k)
          gather_run(col + (ch * kk_ + k) * ld, pad + row_offset(ch, k), idx.data(), ld);
      });
      return;
    }
    over(parallel, c.n0, c.n1, [&](int64_t n) {
      im2col_image(input + (n * g_.in_channels + group * cg_) * hw_, c.p0, c.p1,
                   col + (n - c.n0) * span, ld);
    });
  }

  // grad_input[images of c, group] = col2im(colg (CKK, chunk.cols())), complete
  // once the images' last chunk is in.
  void col2im(const T* colg, const Chunk& c, int64_t group, T* grad_input, bool parallel) const {
    const int64_t ld = c.cols(), span = c.p1 - c.p0;
    if (identity_) {  // every input pixel has exactly one column: a copy
      over(parallel, c.n0, c.n1, [&](int64_t n) {
        T* gx = grad_input + (n * g_.in_channels + group * cg_) * hw_ + c.p0;
        const T* s = colg + (n - c.n0) * span;
        for (int64_t ch = 0; ch < cg_; ++ch) copy_run(gx + ch * hw_, s + ch * ld, span);
      });
      return;
    }
    if (table_) {
      // Scatter-add into padded gradients of the chunk's images (kept across
      // the chunks of one image), then copy their interiors out.
      const int64_t hp = padded_h(), wp = padded_w(), plane = hp * wp, img = cg_ * plane;
      T* grad = scratch<T>(kChunkGradSlot, g_.groups * c.images() * img) +
                group * c.images() * img;  // per group: pixel chunks revisit it
      if (c.p0 == 0) zero_run(grad, c.images() * img);
      const std::vector<int32_t>& idx = index_table(c);
      over(parallel, 0, cg_, [&](int64_t ch) {  // a channel's rows touch only its planes
        for (int64_t k = 0; k < kk_; ++k) {
          const T* src = colg + (ch * kk_ + k) * ld;
          T* dst = grad + row_offset(ch, k);
          for (int64_t q = 0; q < ld; ++q) dst[idx[q]] += src[q];
        }
      });
      if (c.p1 != ohw_) return;
      over(parallel, c.n0, c.n1, [&](int64_t n) {
        T* gx = grad_input + (n * g_.in_channels + group * cg_) * hw_;
        const T* gp = grad + (n - c.n0) * img;
        for (int64_t ch = 0; ch < cg_; ++ch)
          for (int64_t ih = 0; ih < g_.height; ++ih)
            copy_run(gx + ch * hw_ + ih * g_.width,
                     gp + ch * plane + (ih + g_.pad_h) * wp + g_.pad_w, g_.width);
      });
      return;
    }
    over(parallel, c.n0, c.n1, [&](int64_t n) {
      col2im_image(colg + (n - c.n0) * span, ld, c.p0, c.p1, group,
                   grad_input + (n * g_.in_channels + group * cg_) * hw_);
    });
  }

  // Whether chunk c's column matrix is the input itself (a 1x1 stride-1
  // convolution over one image), so im2col/col2im are skipped.
  bool in_place(const Chunk& c) const { return identity_ && c.images() == 1; }
  // Whether chunks of at most max_cols columns may need a column buffer.
  bool needs_col(int64_t max_cols) const { return !identity_ || max_cols > ohw_; }

  const ConvGeometry& g_;
  int64_t cg_, og_, kk_, ckk_, hw_, ohw_;
  bool identity_, table_;

 private:
  // fn(i) for i in [begin, end), over the threads when `parallel`.
  template <typename Fn>
  static void over(bool parallel, int64_t begin, int64_t end, const Fn& fn) {
    if (!parallel) {
      for (int64_t i = begin; i < end; ++i) fn(i);
      return;
    }
    parallel_for(begin, end, 1, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) fn(i);
    });
  }

  // Offset of kernel tap k = ki * kw + kj of channel ch in a padded image.
  int64_t row_offset(int64_t ch, int64_t k) const {
    const int64_t ki = k / g_.kernel_w, kj = k % g_.kernel_w;
    return (ch * padded_h() + ki * g_.dilation_h) * padded_w() + kj * g_.dilation_w;
  }

  // For each column q of chunk c, the padded-image offset of its tap (0, 0)
  // (images of the chunk laid out one after another).  Per thread, rebuilt
  // for each chunk.
  const std::vector<int32_t>& index_table(const Chunk& c) const {
    thread_local std::vector<int32_t> idx;
    const int64_t wp = padded_w(), img = cg_ * padded_h() * wp, span = c.p1 - c.p0;
    idx.resize(c.cols());
    for (int64_t n = 0; n < c.images(); ++n)
      for (int64_t q = 0; q < span; ++q) {
        const int64_t p = c.p0 + q, oh = p / g_.out_w, ow = p % g_.out_w;
        idx[n * span + q] =
            static_cast<int32_t>(n * img + oh * g_.stride_h * wp + ow * g_.stride_w);
      }
    return idx;
  }

  // dst (Cg, Hp, Wp) = the image's group channels x (Cg, H, W) with a zero border.
  void pad_into(const T* x, T* dst) const {
    const int64_t H = g_.height, W = g_.width, hp = padded_h(), wp = padded_w();
    for (int64_t c = 0; c < cg_; ++c) {
      T* plane = dst + c * hp * wp;
      zero_run(plane, g_.pad_h * wp);
      for (int64_t ih = 0; ih < H; ++ih) {
        T* row = plane + (ih + g_.pad_h) * wp;
        zero_run(row, g_.pad_w);
        copy_run(row + g_.pad_w, x + c * hw_ + ih * W, W);
        zero_run(row + g_.pad_w + W, g_.pad_w);
      }
      zero_run(plane + (H + g_.pad_h) * wp, g_.pad_h * wp);
    }
  }

  // Chunk sizes for an im2col buffer of `budget` elements.
  void plan(int64_t budget, int64_t& images, int64_t& pixels) const {
    const int64_t cols = std::max<int64_t>(32, budget / std::max<int64_t>(ckk_, 1));
    if (identity_ && ohw_ >= kIdentityDirectPixels) {
      images = 1;  // each image's plane is its column matrix: no copy, no budget
      pixels = ohw_;
    } else if (ohw_ >= cols) {
      images = 1;
      const int64_t pieces = (ohw_ + cols - 1) / cols;
      pixels = std::max<int64_t>(1, (ohw_ + pieces - 1) / pieces);
    } else {
      images = std::max<int64_t>(1, cols / std::max<int64_t>(ohw_, 1));
      pixels = ohw_;
    }
  }

  template <typename Fn>
  void unit_chunks(int64_t unit, int64_t images, int64_t pixels, const Fn& fn) const {
    const int64_t n0 = unit * images, n1 = std::min(g_.batch, n0 + images);
    if (n1 - n0 > 1 || pixels >= ohw_) {
      fn(Chunk{n0, n1, 0, ohw_});
      return;
    }
    for (int64_t p = 0; p < ohw_; p += pixels) fn(Chunk{n0, n1, p, std::min(ohw_, p + pixels)});
  }

  int64_t padded_h() const { return g_.height + 2 * g_.pad_h; }
  int64_t padded_w() const { return g_.width + 2 * g_.pad_w; }

  // One image's channels of this group (Cg, H, W) with a zero border: a
  // (Cg, Hp, Wp) scratch copy (with slack for the stride-2 loads), or x
  // itself when there is no padding and stride 1.
  const T* padded_input(const T* x) const {
    if (g_.pad_h == 0 && g_.pad_w == 0 && g_.stride_w != 2) return x;
    const int64_t H = g_.height, W = g_.width, hp = padded_h(), wp = padded_w();
    T* buf = scratch<T>(kPadSlot, cg_ * hp * wp + 16);
    zero_run(buf + cg_ * hp * wp, 16);
    for (int64_t c = 0; c < cg_; ++c) {
      T* plane = buf + c * hp * wp;
      zero_run(plane, g_.pad_h * wp);
      for (int64_t ih = 0; ih < H; ++ih) {
        T* row = plane + (ih + g_.pad_h) * wp;
        zero_run(row, g_.pad_w);
        copy_run(row + g_.pad_w, x + c * hw_ + ih * W, W);
        zero_run(row + g_.pad_w + W, g_.pad_w);
      }
      zero_run(plane + (H + g_.pad_h) * wp, g_.pad_h * wp);
    }
    return buf;
  }

  // Rows of col for one image's group channels x (Cg, H, W): output pixels
  // [p0, p1) of the image go to col[row * ld + p - p0].  Reads a padded copy,
  // so every output row is one bounds-free run (stride 1) or gather.
  void im2col_image(const T* x, int64_t p0, int64_t p1, T* col, int64_t ld) const {
    const int64_t OW = g_.out_w, wp = padded_w(), plane = padded_h() * wp;
    const int64_t oh0 = p0 / OW, oh1 = (p1 - 1) / OW, sw = g_.stride_w;
    const int64_t row_step = g_.stride_h * wp;
    const T* xp = padded_input(x);
    for (int64_t c = 0; c < cg_; ++c)
      for (int64_t ki = 0; ki < g_.kernel_h; ++ki)
        for (int64_t kj = 0; kj < g_.kernel_w; ++kj) {
          // Output (oh, ow) reads src[oh * row_step + ow * sw].
          const T* src = xp + c * plane + ki * g_.dilation_h * wp + kj * g_.dilation_w;
          T* dst = col + ((c * g_.kernel_h + ki) * g_.kernel_w + kj) * ld - p0;
          for (int64_t oh = oh0; oh <= oh1; ++oh) {
            const int64_t ob = oh == oh0 ? p0 - oh * OW : 0;
            const int64_t oe = oh == oh1 ? p1 - oh * OW : OW;
            T* d = dst + oh * OW;
            const T* sr = src + oh * row_step;
            if (sw == 1) {
              copy_run(d + ob, sr + ob, oe - ob);
            } else if (sw == 2) {
              copy_even_run(d + ob, sr + 2 * ob, oe - ob);
            } else {
              for (int64_t ow = ob; ow < oe; ++ow) d[ow] = sr[ow * sw];
            }
          }
        }
  }

  // The adjoint of im2col_image for group `group`: accumulates the columns
  // [p0, p1) into a padded gradient of the image, which chunk p0 == 0 clears
  // and chunk p1 == OHW writes (interior only) to gx (Cg, H, W).
  void col2im_image(const T* col, int64_t ld, int64_t p0, int64_t p1, int64_t group,
                    T* gx) const {
    const int64_t H = g_.height, W = g_.width, OW = g_.out_w;
    const bool padded = g_.pad_h != 0 || g_.pad_w != 0;
    const int64_t hp = padded_h(), wp = padded_w(), plane = hp * wp;
    T* gp = padded ? scratch<T>(kPadGradSlot, g_.in_channels * plane) + group * cg_ * plane : gx;
    if (p0 == 0) zero_run(gp, cg_ * plane);
    const int64_t oh0 = p0 / OW, oh1 = (p1 - 1) / OW, sw = g_.stride_w;
    const int64_t row_step = g_.stride_h * wp;
    for (int64_t c = 0; c < cg_; ++c)
      for (int64_t ki = 0; ki < g_.kernel_h; ++ki)
        for (int64_t kj = 0; kj < g_.kernel_w; ++kj) {
          const T* src = col + ((c * g_.kernel_h + ki) * g_.kernel_w + kj) * ld - p0;
          T* dst = gp + c * plane + ki * g_.dilation_h * wp + kj * g_.dilation_w;
          for (int64_t oh = oh0; oh <= oh1; ++oh) {
            const int64_t ob = oh == oh0 ? p0 - oh * OW : 0;
            const int64_t oe = oh == oh1 ? p1 - oh * OW : OW;
            const T* s = src + oh * OW;
            T* dr = dst + oh * row_step;
            if (sw == 1) {
              add_run(dr + ob, s + ob, oe - ob);
            } else {
              for (int64_t ow = ob; ow < oe; ++ow) dr[ow * sw] += s[ow];
            }
          }
        }
    if (!padded || p1 != ohw_) return;
    for (int64_t c = 0; c < cg_; ++c)
      for (int64_t ih = 0; ih < H; ++ih)
        copy_run(gx + c * hw_ + ih * W, gp + c * plane + (ih + g_.pad_h) * wp + g_.pad_w, W);
  }
};

template <typename T>
void run_gemm(bool parallel, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (parallel) {
    gemm_parallel<T>(trans_a, trans_b, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
  } else {
    gemm<T>(trans_a, trans_b, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace

template <typename T>
void conv2d_forward(const ConvGeometry& g, const T* input, const T* weight, const T* bias,
                    T* out) {
  if (g.batch == 0 || g.out_channels == 0 || g.out_h * g.out_w == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (shifted_forward_ok(g)) return conv2d_forward_shifted(g, input, weight, bias, out);
  }
  const ConvRunner<T> r(g);
  const int64_t O = g.out_channels, OHW = r.ohw_;
  struct Buffers {
    T* col;  // (CKK, cols)
    T* tmp;  // (Og, cols) when a chunk spans several images
  };
  auto begin = [&](int64_t max_cols, bool) {
    return Buffers{r.needs_col(max_cols) ? scratch<T>(kColSlot, r.ckk_ * max_cols) : nullptr,
                   scratch<T>(kRowsSlot, r.og_ * max_cols)};
  };
  auto fn = [&](const Chunk& c, bool parallel, Buffers& buf) {
    const int64_t cols = c.cols();
    const bool direct = c.images() == 1;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* b;
      int64_t ldb;
      if (r.in_place(c)) {
        b = input + (c.n0 * g.in_channels + grp * r.cg_) * r.hw_ + c.p0;
        ldb = r.hw_;
      } else {
        r.im2col(input, c, grp, buf.col, parallel);
        b = buf.col;
        ldb = cols;
      }
      T* dst = direct ? out + (c.n0 * O + grp * r.og_) * OHW + c.p0 : buf.tmp;
      const int64_t ldc = direct ? OHW : cols;
      run_gemm<T>(parallel, false, false, r.og_, cols, r.ckk_, weight + grp * r.og_ * r.ckk_,
                  r.ckk_, b, ldb, T(0), dst, ldc);
      // Scatter (several images) and add the bias.
      auto finish = [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t o = 0; o < r.og_; ++o) {
            T* row = out + (n * O + grp * r.og_ + o) * OHW + c.p0;
            const int64_t len = c.p1 - c.p0;
            if (!direct)
              std::memcpy(row, buf.tmp + o * cols + (n - c.n0) * OHW, sizeof(T) * len);
            if (bias != nullptr) {
              const T bv = bias[grp * r.og_ + o];
              for (int64_t i = 0; i < len; ++i) row[i] += bv;
            }
          }
      };
      if (parallel) {
        parallel_for(c.n0, c.n1, 1, finish);
      } else {
        finish(c.n0, c.n1);
      }
    }
  };
  r.for_each_chunk(begin, fn, [](Buffers&) {});
}

template <typename T>
void conv2d_backward(const ConvGeometry& g, const T* input, const T* weight, const T* grad_out,
                     T* grad_input, T* grad_weight, T* grad_bias) {
  if constexpr (std::is_same_v<T, float>) {
    if (g.batch > 0 && g.out_channels > 0 && shifted_backward_ok(g, grad_input != nullptr))
      return conv2d_backward_shifted(g, input, weight, grad_out, grad_input, grad_weight,
                                     grad_bias);
  }
  const ConvRunner<T> r(g);
  const int64_t O = g.out_channels, OHW = r.ohw_;
  const int64_t weight_numel = O * r.ckk_;
  if (grad_weight != nullptr) std::fill(grad_weight, grad_weight + weight_numel, T(0));
  if (grad_bias != nullptr) std::fill(grad_bias, grad_bias + O, T(0));
  if (g.batch == 0 || O == 0 || OHW == 0) {
    if (grad_input != nullptr)
      std::fill(grad_input, grad_input + g.batch * g.in_channels * r.hw_, T(0));
    return;
  }
  std::mutex merge_mutex;
  struct State {
    T* col = nullptr;   // (CKK, cols) im2col of the input
    T* colg = nullptr;  // (CKK, cols) column gradient
    T* gbuf = nullptr;  // (Og, cols) gathered grad_out of a multi-image chunk
    std::vector<T> gw, gb;  // per-thread accumulators (parallel scheme)
    bool local = false;
  };
  auto begin = [&](int64_t max_cols, bool several_threads) {
    State s;
    // Threads sharing the work sum into their own buffers, merged by end().
    s.local = several_threads;
    if (s.local) {
      if (grad_weight != nullptr) s.gw.assign(weight_numel, T(0));
      if (grad_bias != nullptr) s.gb.assign(O, T(0));
    }
    if (r.needs_col(max_cols) && grad_weight != nullptr)
      s.col = scratch<T>(kColSlot, r.ckk_ * max_cols);
    if (r.needs_col(max_cols) && grad_input != nullptr)
      s.colg = scratch<T>(kColGradSlot, r.ckk_ * max_cols);
    s.gbuf = scratch<T>(kRowsSlot, r.og_ * max_cols);
    return s;
  };
  auto fn = [&](const Chunk& c, bool parallel, State& s) {
    const int64_t cols = c.cols();
    const bool single = c.images() == 1;
    T* gw = grad_weight == nullptr ? nullptr : s.local ? s.gw.data() : grad_weight;
    T* gb = grad_bias == nullptr ? nullptr : s.local ? s.gb.data() : grad_bias;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      // This group's output gradient for the chunk: (Og, cols).
      const T* go;
      int64_t ldg;
      if (single) {
        go = grad_out + (c.n0 * O + grp * r.og_) * OHW + c.p0;
        ldg = OHW;
      } else {
        auto gather = [&](int64_t n0, int64_t n1) {
          for (int64_t n = n0; n < n1; ++n)
            for (int64_t o = 0; o < r.og_; ++o)
              std::memcpy(s.gbuf + o * cols + (n - c.n0) * OHW,
                          grad_out + (n * O + grp * r.og_ + o) * OHW, sizeof(T) * OHW);
        };
        if (parallel) {
          parallel_for(c.n0, c.n1, 1, gather);
        } else {
          gather(c.n0, c.n1);
        }
        go = s.gbuf;
        ldg = cols;
      }
      if (gb != nullptr)
        for (int64_t o = 0; o < r.og_; ++o) gb[grp * r.og_ + o] += sum_row(go + o * ldg, cols);
      const T* wg = weight + grp * r.og_ * r.ckk_;
      if (gw != nullptr) {
        const T* x;
        int64_t ldx;
        if (r.in_place(c)) {
          x = input + (c.n0 * g.in_channels + grp * r.cg_) * r.hw_ + c.p0;
          ldx = r.hw_;
        } else {
          r.im2col(input, c, grp, s.col, parallel);
          x = s.col;
          ldx = cols;
        }
        run_gemm<T>(parallel, false, true, r.og_, r.ckk_, cols, go, ldg, x, ldx, T(1),
                    gw + grp * r.og_ * r.ckk_, r.ckk_);
      }
      if (grad_input != nullptr) {
        if (r.in_place(c)) {
          run_gemm<T>(parallel, true, false, r.ckk_, cols, r.og_, wg, r.ckk_, go, ldg, T(0),
                      grad_input + (c.n0 * g.in_channels + grp * r.cg_) * r.hw_ + c.p0, r.hw_);
        } else {
          run_gemm<T>(parallel, true, false, r.ckk_, cols, r.og_, wg, r.ckk_, go, ldg, T(0),
                      s.colg, cols);
          r.col2im(s.colg, c, grp, grad_input, parallel);
        }
      }
    }
  };
  auto end = [&](State& s) {
    if (!s.local) return;
    std::lock_guard<std::mutex> lock(merge_mutex);
    if (grad_weight != nullptr)
      for (int64_t i = 0; i < weight_numel; ++i) grad_weight[i] += s.gw[i];
    if (grad_bias != nullptr)
      for (int64_t i = 0; i < O; ++i) grad_bias[i] += s.gb[i];
  };
  r.for_each_chunk(begin, fn, end);
}

template void conv2d_forward<float>(const ConvGeometry&, const float*, const float*, const float*,
                                    float*);
template void conv2d_forward<double>(const ConvGeometry&, const double*, const double*,
                                     const double*, double*);
template void conv2d_backward<float>(const ConvGeometry&, const float*, const float*,
                                     const float*, float*, float*, float*);
template void conv2d_backward<double>(const ConvGeometry&, const double*, const double*,
                                      const double*, double*, double*, double*);

// ---- the dispatch slots (native/Convolution.h) -----------------------------------

namespace {

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// Under WeightReuse (tensor/WeightReuse.h), which weight oneDNN reads and at
// which version, so it may reuse a reordered copy; otherwise nothing.
onednn::WeightVersion weight_version(const Tensor& weight) {
  if (!WeightReuse::is_enabled()) return {};
  return weight_version_of(weight);
}

void conv2d_forward_kernel(const ConvGeometry& g, const Tensor& input, const Tensor& weight,
                           const Tensor& bias, const Tensor& out) {
  const DType dtype = input.dtype();
  const void* b = bias.defined() ? bias.data_ptr() : nullptr;
  if (g.channels_last)  // only oneDNN's passes ask for it (conv2d_channels_last)
    return onednn::conv2d_forward(g, dtype, input.data_ptr(), weight.data_ptr(), b,
                                  out.data_ptr(), weight_version(weight));
  run_conv_pass(
      onednn::ConvPass::kForward, g, dtype,
      [&] {
        auto direct = [&] {
          dispatch_floating(dtype, "conv2d", [&](auto tag) {
            using T = typename decltype(tag)::type;
            conv2d_forward<T>(g, ptr<T>(input), ptr<T>(weight), ptr<T>(bias), ptr<T>(out));
          });
        };
        if (dtype != kFloat32) return direct();
        run_loom_conv_pass(
            onednn::ConvPass::kForward, g,
            [&] {
              winograd_forward(g, ptr<float>(input), ptr<float>(weight), ptr<float>(bias),
                               ptr<float>(out), weight_version(weight));
            },
            direct);
      },
      [&] {
        onednn::conv2d_forward(g, dtype, input.data_ptr(), weight.data_ptr(), b,
                               out.data_ptr(), weight_version(weight));
      });
}

// The wanted gradients in oneDNN, both passes in one call when both are
// wanted (it reorders the output gradient once).
void backward_in_onednn(const ConvGeometry& g, const Tensor& input, const Tensor& weight,
                        const Tensor& grad_output, const Tensor& grad_input,
                        const Tensor& grad_weight, const Tensor& grad_bias) {
  const DType dtype = input.dtype();
  void* gb = grad_bias.defined() ? grad_bias.data_ptr() : nullptr;
  if (!grad_weight.defined() && !grad_bias.defined())
    return onednn::conv2d_backward_data(g, dtype, weight.data_ptr(), grad_output.data_ptr(),
                                        grad_input.data_ptr(), weight_version(weight));
  // oneDNN always computes the weight gradient; a bias-only request writes
  // it to scratch.
  const Tensor gw = grad_weight.defined() ? grad_weight : empty_like(weight);
  if (!grad_input.defined())
    return onednn::conv2d_backward_weights(g, dtype, input.data_ptr(), grad_output.data_ptr(),
                                           gw.data_ptr(), gb);
  onednn::conv2d_backward(g, dtype, input.data_ptr(), weight.data_ptr(), grad_output.data_ptr(),
                          grad_input.data_ptr(), gw.data_ptr(), gb, weight_version(weight));
}

// Each pass (input gradient; weight and bias gradients) goes to its backend
// on its own; both passes settled on one backend run in one call of it
// (loom's share the im2col, oneDNN's the reordered output gradient).
void conv2d_backward_kernel(const ConvGeometry& g, const Tensor& input, const Tensor& weight,
                            const Tensor& grad_output, const Tensor& grad_input,
                            const Tensor& grad_weight, const Tensor& grad_bias) {
  const DType dtype = input.dtype();
  auto direct = [&](const Tensor& gi, const Tensor& gw, const Tensor& gb) {
    dispatch_floating(dtype, "conv2d_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      conv2d_backward<T>(g, ptr<T>(input), ptr<T>(weight), ptr<T>(grad_output), ptr<T>(gi),
                         ptr<T>(gw), ptr<T>(gb));
    });
  };
  // The input gradient may go to loom's Winograd kernels (ConvChoice.h);
  // both passes in one call of the direct ones share their im2col.
  auto run_loom = [&](const Tensor& gi, const Tensor& gw, const Tensor& gb) {
    if (!gi.defined() || dtype != kFloat32 || !winograd_applies(g)) return direct(gi, gw, gb);
    run_loom_conv_pass(
        onednn::ConvPass::kBackwardData, g,
        [&] {
          winograd_backward_data(g, ptr<float>(weight), ptr<float>(grad_output), ptr<float>(gi),
                                 weight_version(weight));
        },
        [&] { direct(gi, Tensor(), Tensor()); });
    if (gw.defined() || gb.defined()) direct(Tensor(), gw, gb);
  };
  const bool weights = grad_weight.defined() || grad_bias.defined();
  if (g.channels_last) return backward_in_onednn(g, input, weight, grad_output, grad_input,
                                                 grad_weight, grad_bias);
  if (grad_input.defined() && weights &&
      conv_pass_settled_on_loom(onednn::ConvPass::kBackwardData, g, dtype) &&
      conv_pass_settled_on_loom(onednn::ConvPass::kBackwardWeights, g, dtype)) {
    run_loom(grad_input, grad_weight, grad_bias);
    return;
  }
  if (grad_input.defined() && weights &&
      conv_pass_settled_on_onednn(onednn::ConvPass::kBackwardData, g, dtype) &&
      conv_pass_settled_on_onednn(onednn::ConvPass::kBackwardWeights, g, dtype))
    return backward_in_onednn(g, input, weight, grad_output, grad_input, grad_weight, grad_bias);
  if (grad_input.defined()) {
    run_conv_pass(
        onednn::ConvPass::kBackwardData, g, dtype,
        [&] { run_loom(grad_input, Tensor(), Tensor()); },
        [&] {
          onednn::conv2d_backward_data(g, dtype, weight.data_ptr(), grad_output.data_ptr(),
                                       grad_input.data_ptr(), weight_version(weight));
        });
  }
  if (weights) {
    run_conv_pass(
        onednn::ConvPass::kBackwardWeights, g, dtype,
        [&] { run_loom(Tensor(), grad_weight, grad_bias); },
        [&] {
          // oneDNN always computes the weight gradient; a bias-only request
          // writes it to scratch.
          const Tensor gw = grad_weight.defined() ? grad_weight : empty_like(weight);
          onednn::conv2d_backward_weights(g, dtype, input.data_ptr(), grad_output.data_ptr(),
                                          gw.data_ptr(),
                                          grad_bias.defined() ? grad_bias.data_ptr() : nullptr);
        });
  }
}

// Whether every pass in `passes` runs in dtype as it is (bfloat16: oneDNN).
bool conv2d_takes(const ConvGeometry& g, DType dtype, int passes) {
  using onednn::ConvPass;
  return (!(passes & native::kConv2dForward) || conv_pass_runs(ConvPass::kForward, g, dtype)) &&
         (!(passes & native::kConv2dBackwardData) ||
          conv_pass_runs(ConvPass::kBackwardData, g, dtype)) &&
         (!(passes & native::kConv2dBackwardWeights) ||
          conv_pass_runs(ConvPass::kBackwardWeights, g, dtype));
}

// Channels-last activations for passes that all run in oneDNN without a
// timed choice (bfloat16, or LOOM_CPU_CONV=onednn): its kernels read and
// write NHWC as it is.  A float32 pass the timing may give to loom's NCHW
// kernels stays NCHW.
bool conv2d_channels_last(const ConvGeometry& g, DType dtype, int passes) {
  using onednn::ConvPass;
  if (dtype != kBFloat16 && onednn::conv_backend() != "onednn") return false;
  return (!(passes & native::kConv2dForward) ||
          conv_pass_settled_on_onednn(ConvPass::kForward, g, dtype)) &&
         (!(passes & native::kConv2dBackwardData) ||
          conv_pass_settled_on_onednn(ConvPass::kBackwardData, g, dtype)) &&
         (!(passes & native::kConv2dBackwardWeights) ||
          conv_pass_settled_on_onednn(ConvPass::kBackwardWeights, g, dtype));
}

}  // namespace

static const native::RegisterKernel reg_conv2d_channels_last(native::conv2d_channels_last_stub,
                                                             kCPU, &conv2d_channels_last);
static const native::RegisterKernel reg_conv2d_takes(native::conv2d_takes_stub, kCPU,
                                                     &conv2d_takes);
static const native::RegisterKernel reg_conv2d_forward(native::conv2d_forward_stub, kCPU,
                                                       &conv2d_forward_kernel);
static const native::RegisterKernel reg_conv2d_backward(native::conv2d_backward_stub, kCPU,
                                                        &conv2d_backward_kernel);

}  // namespace cpu
}  // namespace loom
