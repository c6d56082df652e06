// CPU group-norm kernels over a contiguous (N, C, HxW) input (see
// tensor/native/GroupNorm.h), registered into group_norm_stub and
// group_norm_backward_stub.  Values are centred as e = (x - mean) - dm, dm
// the rounding error of the stored mean (cpu/NormStats.h).
//
// A group (n, g) is one contiguous run of D * HxW values (D = C / G channels
// of HxW each), so everything runs in parallel over the N * G groups:
//
// Forward: the group's statistics in double, then per channel one fused pass
// y = ((x - mean) - dm) * a + b[c] with a = rstd * w[c].
//
// Backward: per channel of the group the sums (double)
//   sum_dy[n, c] = sum_s dy,  sum_dy_xmu[n, c] = sum_s dy (x - mean),
//   and sum_s (x - mean), whose total over the group gives dm;
// then sum_dy_xmu becomes sum_s dy e (minus dm * sum_dy), and with g = dy * w,
// A = sum_c w[c] sum_dy[n, c], B = sum_c w[c] sum_dy_xmu[n, c]:
//   dx = rstd * w[c] * dy - rstd^3 * B / count * e - rstd * A / count
// (count = D * HxW).  Then, parallel over channels, in a fixed order over n:
//   dw[c] = sum_n sum_dy_xmu[n, c] * rstd[n, g],   db[c] = sum_n sum_dy[n, c].
#include <algorithm>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/NormStats.h"
#include "tensor/native/GroupNorm.h"

namespace loom {
namespace cpu {
namespace {

constexpr int64_t kGrain = 16384;  // values per task, at least

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// Calls fn(n, g) for every group, in parallel.
template <typename Fn>
void for_groups(int64_t N, int64_t G, int64_t group_size, const Fn& fn) {
  parallel_for(0, N * G, std::max<int64_t>(1, kGrain / std::max<int64_t>(group_size, 1)),
               [&](int64_t u0, int64_t u1) {
                 for (int64_t u = u0; u < u1; ++u) fn(u / G, u % G);
               });
}

template <typename T>
void forward(const T* x, const T* w, const T* b, int64_t N, int64_t C, int64_t HxW, int64_t G,
             double eps, T* y, T* mean, T* rstd) {
  const int64_t D = C / G;
  for_groups(N, G, D * HxW, [&](int64_t n, int64_t g) {
    const int64_t base = (n * C + g * D) * HxW;  // the group's first value
    const Moments s = moments(x + base, D * HxW, eps);
    const T m = static_cast<T>(s.mean), r = static_cast<T>(s.rstd);
    const T dm = static_cast<T>(s.mean - static_cast<double>(m));
    mean[n * G + g] = m;
    rstd[n * G + g] = r;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = g * D + d;
      const T a = w ? r * w[c] : r;
      const T shift = b ? b[c] : T(0);
      const T* xc = x + base + d * HxW;
      T* yc = y + base + d * HxW;
#pragma omp simd
      for (int64_t i = 0; i < HxW; ++i) yc[i] = ((xc[i] - m) - dm) * a + shift;
    }
  });
}

template <typename T>
void backward(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, int64_t N,
              int64_t C, int64_t HxW, int64_t G, T* dx, T* dw, T* db) {
  const int64_t D = C / G;
  const double count = static_cast<double>(D * HxW);
  // (N, C) per-channel sums of dy and dy * e
  std::vector<double> sum_dy(N * C), sum_dy_xmu(N * C);
  for_groups(N, G, D * HxW, [&](int64_t n, int64_t g) {
    const T m = mean[n * G + g];
    double S = 0;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = g * D + d, off = (n * C + c) * HxW;
      double s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s1, s2, s3)
      for (int64_t i = 0; i < HxW; ++i) {
        const double gy = static_cast<double>(dy[off + i]);
        const double xm = static_cast<double>(x[off + i] - m);
        s1 += gy;
        s2 += gy * xm;
        s3 += xm;
      }
      sum_dy[n * C + c] = s1;
      sum_dy_xmu[n * C + c] = s2;
      S += s3;
    }
    const double delta = count > 0 ? S / count : 0.0;
    double A = 0, B = 0;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = g * D + d;
      sum_dy_xmu[n * C + c] -= delta * sum_dy[n * C + c];  // sum dy (x - mean) -> sum dy e
      const double wc = w ? static_cast<double>(w[c]) : 1.0;
      A += wc * sum_dy[n * C + c];
      B += wc * sum_dy_xmu[n * C + c];
    }
    if (!dx) return;
    const double rd = static_cast<double>(rstd[n * G + g]);
    const T r = rstd[n * G + g];
    const T b1 = static_cast<T>(-rd * rd * rd * B / count);
    const T c0 = static_cast<T>(-rd * A / count);
    const T dm = static_cast<T>(delta);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = g * D + d, off = (n * C + c) * HxW;
      const T a = w ? r * w[c] : r;
      const T* dyc = dy + off;
      const T* xc = x + off;
      T* dxc = dx + off;
#pragma omp simd
      for (int64_t i = 0; i < HxW; ++i) dxc[i] = a * dyc[i] + b1 * ((xc[i] - m) - dm) + c0;
    }
  });
  if (!dw && !db) return;
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1));
  parallel_for(0, C, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t g = c / D;
      double sw = 0, sb = 0;
      for (int64_t n = 0; n < N; ++n) {
        sw += sum_dy_xmu[n * C + c] * static_cast<double>(rstd[n * G + g]);
        sb += sum_dy[n * C + c];
      }
      if (dw) dw[c] = static_cast<T>(sw);
      if (db) db[c] = static_cast<T>(sb);
    }
  });
}

void group_norm_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t N,
                       int64_t C, int64_t HxW, int64_t group, double eps, const Tensor& out,
                       const Tensor& mean, const Tensor& rstd) {
  dispatch_floating(input.dtype(), "group_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(cptr<T>(input), cptr<T>(weight), cptr<T>(bias), N, C, HxW, group, eps, ptr<T>(out),
               ptr<T>(mean), ptr<T>(rstd));
  });
}

void group_norm_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, const Tensor& weight, int64_t N, int64_t C,
                                int64_t HxW, int64_t group, const Tensor& grad_input,
                                const Tensor& grad_weight, const Tensor& grad_bias) {
  dispatch_floating(input.dtype(), "group_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward<T>(cptr<T>(grad_out), cptr<T>(input), cptr<T>(mean), cptr<T>(rstd), cptr<T>(weight),
                N, C, HxW, group, ptr<T>(grad_input), ptr<T>(grad_weight), ptr<T>(grad_bias));
  });
}

}  // namespace

static const native::RegisterKernel reg_group_norm(native::group_norm_stub, kCPU,
                                                   &group_norm_kernel);
static const native::RegisterKernel reg_group_norm_backward(native::group_norm_backward_stub, kCPU,
                                                            &group_norm_backward_kernel);

}  // namespace cpu
}  // namespace loom
