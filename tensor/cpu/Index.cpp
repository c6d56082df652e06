// CPU kernels for native index_select / index_add / gather / scatter_add.
//
// index_select and index_add work on contiguous operands viewed as
// (outer, size along dim, inner): each index moves a run of `inner` elements.
// gather and scatter_add walk the index tensor in "lines" along dim: every
// line fixes all other coordinates, so two lines never touch the same output
// element and lines run in parallel without races (scatter_add accumulates
// repeated indices within one line, sequentially).
#include <algorithm>
#include <array>
#include <cstring>

#include "tensor/Parallel.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Index.h"

namespace loom {
namespace cpu {
namespace {

// Throws when any of the n values is outside [0, size).
void check_indices(const char* op, const int64_t* idx, int64_t n, int64_t dim, int64_t size) {
  for (int64_t i = 0; i < n; ++i)
    LOOM_CHECK(idx[i] >= 0 && idx[i] < size, op, ": index ", idx[i],
               " is out of bounds for dimension ", dim, " with size ", size);
}

// Adds, with bool as logical or.
template <typename T>
inline T plus(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else {
    return static_cast<T>(a + b);
  }
}

// Calls fn(offsets) for every line of `shape` along `dim`, where offsets[k]
// is operand k's element offset of the line's first position (coordinate 0
// along dim) under strides[k].  Lines are split over the intra-op threads.
template <size_t N, typename Fn>
void for_each_line(const IntList& shape, int64_t dim, const std::array<IntList, N>& strides,
                   const Fn& fn) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t length = shape[dim];
  const int64_t numel = numel_of(shape);
  if (numel == 0) return;
  const int64_t lines = numel / length;
  parallel_for(0, lines, std::max<int64_t>(1, kElementwiseGrain / length),
               [&](int64_t begin, int64_t end) {
                 for (int64_t line = begin; line < end; ++line) {
                   std::array<int64_t, N> offsets{};
                   int64_t rem = line;
                   for (int64_t d = rank - 1; d >= 0; --d) {
                     if (d == dim) continue;
                     const int64_t coord = rem % shape[d];
                     rem /= shape[d];
                     for (size_t k = 0; k < N; ++k) offsets[k] += coord * strides[k][d];
                   }
                   fn(offsets);
                 }
               });
}

}  // namespace

void index_select_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  const int64_t n = index.numel();
  const int64_t size = self.sizes()[dim];
  const int64_t* idx = index.data_ptr<int64_t>();
  check_indices("index_select", idx, n, dim, size);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.sizes()[d];
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= self.sizes()[d];
  const int64_t run = inner * static_cast<int64_t>(self.element_size());  // bytes
  if (run == 0 || n == 0 || outer == 0) return;
  const char* src = static_cast<const char*>(self.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  parallel_for(0, outer * n, std::max<int64_t>(1, (1 << 16) / run), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t o = row / n, i = row % n;
      std::memcpy(dst + row * run, src + (o * size + idx[i]) * run, run);
    }
  });
}

void index_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source) {
  const int64_t n = index.numel();
  const int64_t size = out.sizes()[dim];
  const int64_t* idx = index.data_ptr<int64_t>();
  check_indices("index_add", idx, n, dim, size);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.sizes()[d];
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.sizes()[d];
  if (inner == 0 || n == 0 || outer == 0) return;
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = static_cast<T*>(out.data_ptr());
    const T* src = static_cast<const T*>(source.data_ptr());
    // Threads own disjoint (outer, inner) ranges; each walks the indices in
    // order, so repeated indices accumulate without races.
    auto add_rows = [&](int64_t o, int64_t k0, int64_t k1) {
      for (int64_t i = 0; i < n; ++i) {
        T* d = dst + (o * size + idx[i]) * inner;
        const T* s = src + (o * n + i) * inner;
        for (int64_t k = k0; k < k1; ++k) d[k] = plus<T>(d[k], s[k]);
      }
    };
    if (outer > 1) {
      parallel_for(0, outer, std::max<int64_t>(1, kElementwiseGrain / (n * inner)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t o = b; o < e; ++o) add_rows(o, 0, inner);
                   });
    } else {
      parallel_for(0, inner, std::max<int64_t>(1, kElementwiseGrain / n),
                   [&](int64_t b, int64_t e) { add_rows(0, b, e); });
    }
  });
}

void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  const int64_t* idx = index.data_ptr<int64_t>();
  check_indices("gather", idx, index.numel(), dim, self.sizes()[dim]);
  const int64_t length = index.sizes()[dim];
  const int64_t out_step = out.strides()[dim], idx_step = index.strides()[dim];
  const int64_t self_step = self.strides()[dim];
  dispatch_all_dtypes(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = static_cast<T*>(out.data_ptr());
    const T* src = static_cast<const T*>(self.data_ptr());
    for_each_line<3>(index.sizes(), dim, {out.strides(), index.strides(), self.strides()},
                     [&](const std::array<int64_t, 3>& off) {
                       for (int64_t k = 0; k < length; ++k)
                         dst[off[0] + k * out_step] =
                             src[off[2] + idx[off[1] + k * idx_step] * self_step];
                     });
  });
}

void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t* idx = index.data_ptr<int64_t>();
  check_indices("scatter_add", idx, index.numel(), dim, out.sizes()[dim]);
  const int64_t length = index.sizes()[dim];
  const int64_t out_step = out.strides()[dim], idx_step = index.strides()[dim];
  const int64_t src_step = src.strides()[dim];
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = static_cast<T*>(out.data_ptr());
    const T* s = static_cast<const T*>(src.data_ptr());
    for_each_line<3>(index.sizes(), dim, {out.strides(), index.strides(), src.strides()},
                     [&](const std::array<int64_t, 3>& off) {
                       for (int64_t k = 0; k < length; ++k) {
                         T& d = dst[off[0] + idx[off[1] + k * idx_step] * out_step];
                         d = plus<T>(d, s[off[2] + k * src_step]);
                       }
                     });
  });
}

// Throws message(v) for the first value v of idx outside [0, limit) that is
// not the ignored one.
void check_index_values_kernel(const Tensor& idx, int64_t limit, bool has_ignore, int64_t ignore,
                               const std::function<std::string(int64_t)>& message) {
  const int64_t* p = static_cast<const int64_t*>(idx.data_ptr());
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = p[i];
    if ((v < 0 || v >= limit) && !(has_ignore && v == ignore)) throw Error(message(v));
  }
}

static const native::RegisterKernel reg_index_select(native::index_select_stub, kCPU,
                                                     &index_select_kernel);
static const native::RegisterKernel reg_index_add(native::index_add_stub, kCPU, &index_add_kernel);
static const native::RegisterKernel reg_gather(native::gather_stub, kCPU, &gather_kernel);
static const native::RegisterKernel reg_scatter_add(native::scatter_add_stub, kCPU,
                                                    &scatter_add_kernel);
static const native::RegisterKernel reg_check_index_values(native::check_index_values_stub, kCPU,
                                                           &check_index_values_kernel);

}  // namespace cpu
}  // namespace loom
