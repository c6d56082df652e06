// CPU reduction kernels over a contiguous (outer, reduce, inner) block.
//
// One generic loop (reduce_block) serves sum, mean, var (two passes: mean,
// then squared deviations) and max/min (two passes: the value, then its first
// index): an accumulator per output, a step per input value, a combine for
// partial results and a finish that writes the output.  Work is split over
// outputs; when there are fewer output tiles than threads (a full reduction
// of a large tensor, say) the reduced axis is split instead and the partials
// are combined in chunk order.  Contiguous runs use eight interleaved
// accumulators; with inner > 1 the loop walks rows of `inner` contiguous
// values, so either way the compiler can vectorise the step.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/native/Reduce.h"

namespace loom {
namespace cpu {

namespace {

constexpr int64_t kReduceGrain = 32768;  // input values per thread, at least
constexpr int64_t kTile = 256;           // outputs per tile when inner > 1

// Reduces the contiguous run x[r0..r1) of output o into an accumulator.  Eight
// interleaved lanes break the dependency chain of the accumulator (and let
// the compiler vectorise); they are combined in lane order.
template <typename T, typename Acc, typename Step, typename Combine>
Acc reduce_run(const T* x, int64_t r0, int64_t r1, int64_t o, const Acc& init, const Step& step,
               const Combine& combine) {
  constexpr int64_t kLanes = 8;
  Acc lanes[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lanes[j] = init;
  int64_t r = r0;
  for (; r + kLanes <= r1; r += kLanes) {
#pragma omp simd
    for (int64_t j = 0; j < kLanes; ++j) step(lanes[j], x[r + j], r + j, o);
  }
  Acc acc = lanes[0];
  for (int64_t j = 1; j < kLanes; ++j) combine(acc, lanes[j]);
  for (; r < r1; ++r) step(acc, x[r], r, o);
  return acc;
}

// step(acc, value, r, o) folds value x[a, r, k] into the accumulator of
// output o = a * K + k; combine(acc, other) merges another partial of the
// same output (it must not depend on which came first beyond index ties);
// finish(o, acc) writes output o.
template <typename T, typename Acc, typename Step, typename Combine, typename Finish>
void reduce_block(const T* x, int64_t A, int64_t R, int64_t K, const Acc& init, const Step& step,
                  const Combine& combine, const Finish& finish) {
  const int64_t n_out = A * K;
  if (n_out == 0) return;
  const int64_t tiles_per_a = K == 1 ? 1 : (K + kTile - 1) / kTile;
  const int64_t units = A * tiles_per_a;
  const int64_t threads = get_num_threads();
  const int64_t chunks = std::min<int64_t>(threads, (R * n_out) / kReduceGrain);

  if (units < threads && chunks > 1 && R >= chunks && !omp_in_parallel()) {
    // Split the reduced axis: chunk c reduces r in [R*c/chunks, R*(c+1)/chunks).
    // (Arrays, not std::vector: Acc may be bool.)
    std::unique_ptr<Acc[]> partial(new Acc[chunks * n_out]);
    std::fill(partial.get(), partial.get() + chunks * n_out, init);
    parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        Acc* p = partial.get() + c * n_out;
        const int64_t r0 = R * c / chunks, r1 = R * (c + 1) / chunks;
        for (int64_t a = 0; a < A; ++a) {
          if (K == 1) {
            p[a] = reduce_run(x + a * R, r0, r1, a, init, step, combine);
            continue;
          }
          Acc* pa = p + a * K;
          for (int64_t r = r0; r < r1; ++r) {
            const T* row = x + (a * R + r) * K;
#pragma omp simd
            for (int64_t k = 0; k < K; ++k) step(pa[k], row[k], r, a * K + k);
          }
        }
      }
    });
    for (int64_t o = 0; o < n_out; ++o) {
      Acc acc = partial[o];
      for (int64_t c = 1; c < chunks; ++c) combine(acc, partial[c * n_out + o]);
      finish(o, acc);
    }
    return;
  }

  if (K == 1) {
    const int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1));
    parallel_for(0, A, grain, [&](int64_t b, int64_t e) {
      for (int64_t a = b; a < e; ++a)
        finish(a, reduce_run(x + a * R, 0, R, a, init, step, combine));
    });
    return;
  }

  const int64_t tile_work = std::max<int64_t>(R, 1) * std::min(K, kTile);
  const int64_t grain = std::max<int64_t>(1, kReduceGrain / tile_work);
  parallel_for(0, units, grain, [&](int64_t b, int64_t e) {
    std::unique_ptr<Acc[]> acc(new Acc[std::min(K, kTile)]);
    for (int64_t u = b; u < e; ++u) {
      const int64_t a = u / tiles_per_a;
      const int64_t k0 = (u % tiles_per_a) * kTile;
      const int64_t n = std::min(K - k0, kTile);
      const int64_t o0 = a * K + k0;
      Acc* pa = acc.get();
      std::fill(pa, pa + n, init);
      for (int64_t r = 0; r < R; ++r) {
        const T* row = x + (a * R + r) * K + k0;
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) step(pa[k], row[k], r, o0 + k);
      }
      for (int64_t k = 0; k < n; ++k) finish(o0 + k, pa[k]);
    }
  });
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

}  // namespace

void sum_kernel(const Tensor& out, const native::ReduceView& v, bool mean) {
  dispatch_dtype(v.src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    const T* x = static_cast<const T*>(v.src.data_ptr());
    Out* o = static_cast<Out*>(out.data_ptr());
    const double count = static_cast<double>(v.reduce);
    reduce_block<T, Acc>(
        x, v.outer, v.reduce, v.inner, Acc(0),
        [](Acc& acc, T value, int64_t, int64_t) { acc += static_cast<Acc>(value); },
        [](Acc& acc, const Acc& later) { acc += later; },
        [&](int64_t i, const Acc& acc) {
          if constexpr (std::is_floating_point_v<T>) {
            o[i] = static_cast<Out>(mean ? acc / count : acc);
          } else {
            o[i] = static_cast<Out>(acc);
          }
        });
  });
}

void var_kernel(const Tensor& out, const native::ReduceView& v, int64_t correction,
                bool take_sqrt) {
  dispatch_floating(v.src.dtype(), "var", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(v.src.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    const int64_t n_out = v.outer * v.inner;
    // Two passes in double: the means, then squared deviations from them.
    std::vector<double> means(static_cast<size_t>(n_out));
    const double count = static_cast<double>(v.reduce);
    reduce_block<T, double>(
        x, v.outer, v.reduce, v.inner, 0.0,
        [](double& acc, T value, int64_t, int64_t) { acc += value; },
        [](double& acc, const double& later) { acc += later; },
        [&](int64_t i, const double& acc) { means[i] = acc / count; });
    const double divisor = static_cast<double>(std::max<int64_t>(0, v.reduce - correction));
    const double* m = means.data();
    reduce_block<T, double>(
        x, v.outer, v.reduce, v.inner, 0.0,
        [m](double& acc, T value, int64_t, int64_t i) {
          const double d = value - m[i];
          acc += d * d;
        },
        [](double& acc, const double& later) { acc += later; },
        [&](int64_t i, const double& acc) {
          const double var = acc / divisor;
          o[i] = static_cast<T>(take_sqrt ? std::sqrt(var) : var);
        });
  });
}

void extremum_kernel(const Tensor& values, const Tensor& indices, const native::ReduceView& v,
                     bool is_max) {
  dispatch_dtype(v.src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(v.src.data_ptr());
    const int64_t n_out = v.outer * v.inner;
    const int64_t R = v.reduce;
    T* vo = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
    int64_t* io = indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr;
    // Two branch-free passes vectorise far better than one that tracks the
    // index: first the extreme value (NaN wins), then its first position.
    T start;
    if constexpr (std::is_floating_point_v<T>) {
      start = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      start = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
    auto combine = [is_max](T& acc, const T& value) {
      const bool take = (is_max ? value > acc : value < acc) || is_nan(value);
      acc = take ? value : acc;
    };
    auto step = [&combine](T& acc, T value, int64_t, int64_t) { combine(acc, value); };
    // The first r with row[r] == want (NaN matches NaN): a predictable early exit.
    auto first_hit = [R](const T* row, T want) {
      int64_t r = 0;
      if (is_nan(want)) {
        while (r < R && !is_nan(row[r])) ++r;
      } else {
        while (r < R && !(row[r] == want)) ++r;
      }
      return r;
    };
    if (v.inner == 1 && v.outer >= get_num_threads()) {
      // Many contiguous rows: both passes per row while it is in cache.
      const int64_t grain = std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1));
      parallel_for(0, v.outer, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t a = lo; a < hi; ++a) {
          const T* row = x + a * R;
          const T m = reduce_run(row, 0, R, a, start, step, combine);
          if (vo) vo[a] = m;
          if (io) io[a] = first_hit(row, m);
        }
      });
      return;
    }
    std::unique_ptr<T[]> best(new T[n_out]);  // (outer * inner)
    reduce_block<T, T>(x, v.outer, R, v.inner, start, step, combine,
                       [&](int64_t i, const T& acc) { best[i] = acc; });
    if (vo) std::copy(best.get(), best.get() + n_out, vo);
    if (!io) return;
    const T* b = best.get();
    if (v.inner == 1) {
      for (int64_t a = 0; a < v.outer; ++a) io[a] = first_hit(x + a * R, b[a]);
      return;
    }
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
    reduce_block<T, int64_t>(
        x, v.outer, v.reduce, v.inner, kNone,
        [b](int64_t& acc, T value, int64_t r, int64_t i) {
          const bool hit = value == b[i] || (is_nan(value) && is_nan(b[i]));
          acc = hit && r < acc ? r : acc;
        },
        [](int64_t& acc, const int64_t& other) { acc = other < acc ? other : acc; },
        [io](int64_t i, const int64_t& acc) { io[i] = acc; });
  });
}

void scatter_reduced_kernel(const Tensor& grad_input, const Tensor& grad, const Tensor& indices,
                            int64_t outer, int64_t reduce, int64_t inner) {
  dispatch_floating(grad.dtype(), "max/min backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_input.data_ptr());  // (outer, reduce, inner)
    const T* g = static_cast<const T*>(grad.data_ptr());  // (outer, inner)
    const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
    parallel_for(0, outer * inner, kReduceGrain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const int64_t a = o / inner, k = o % inner;
        gi[(a * reduce + idx[o]) * inner + k] = g[o];
      }
    });
  });
}

static const native::RegisterKernel reg_sum(native::sum_stub, kCPU, &sum_kernel);
static const native::RegisterKernel reg_var(native::var_stub, kCPU, &var_kernel);
static const native::RegisterKernel reg_extremum(native::extremum_stub, kCPU, &extremum_kernel);
static const native::RegisterKernel reg_scatter_reduced(native::scatter_reduced_stub, kCPU,
                                                        &scatter_reduced_kernel);

}  // namespace cpu
}  // namespace loom
