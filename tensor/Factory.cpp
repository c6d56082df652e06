#include "tensor/Factory.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"
#include "tensor/native/CounterRandom.h"

namespace loom {
namespace {

void check_sizes(const IntList& sizes, const char* what) {
  for (size_t d = 0; d < sizes.size(); ++d)
    LOOM_CHECK(sizes[d] >= 0, what, ": negative size ", sizes[d], " in dim ", d, " of ",
               shape_str(sizes));
}

void finish(Tensor& t, const TensorOptions& options) {
  if (options.requires_grad_) t.requires_grad_(true);
}

// Fills a CPU tensor from a per-element generator, then moves it to `options`.
template <typename Fill>
Tensor generate(IntList sizes, const TensorOptions& options, const char* what, Fill&& fill) {
  check_sizes(sizes, what);
  Tensor host = empty(sizes, TensorOptions(options.dtype_));
  dispatch_all_dtypes(options.dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(host.data_ptr());
    const int64_t n = host.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(fill(i));
  });
  Tensor out = native::to(host, options.device_, options.dtype_);
  finish(out, options);
  return out;
}

Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }

// A large rand/randn: a counter-based fill (native/CounterRandom.h) on the
// intra-op threads, keyed by one draw of `g`.
template <typename Fill>
Tensor generate_counter(IntList sizes, const TensorOptions& options, Generator& g,
                        const Fill& fill) {
  const uint64_t key = native::counter_key(g);
  Tensor host = empty(sizes, TensorOptions(options.dtype_));
  dispatch_all_dtypes(options.dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill(static_cast<T*>(host.data_ptr()), host.numel(), key);
  });
  Tensor out = native::to(host, options.device_, options.dtype_);
  finish(out, options);
  return out;
}

}  // namespace

Tensor empty(IntList sizes, TensorOptions options) {
  return empty(std::move(sizes), options, MemoryFormat::kContiguous);
}

Tensor empty(IntList sizes, TensorOptions options, MemoryFormat format) {
  check_sizes(sizes, "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage(numel_of(sizes) * element_size(options.dtype_), options.device_);
  impl->strides = strides_for(sizes, format);
  impl->sizes = std::move(sizes);
  impl->dtype = options.dtype_;
  impl->device = options.device_;
  Tensor t(impl);
  finish(t, options);
  return t;
}

Tensor full(IntList sizes, Scalar value, TensorOptions options) {
  Tensor t = empty(std::move(sizes), TensorOptions(options.dtype_).device(options.device_));
  native::fill_(t, value);
  finish(t, options);
  return t;
}

Tensor zeros(IntList sizes, TensorOptions options) { return full(std::move(sizes), 0, options); }
Tensor ones(IntList sizes, TensorOptions options) { return full(std::move(sizes), 1, options); }
Tensor scalar_tensor(Scalar value, TensorOptions options) { return full({}, value, options); }

Tensor arange(Scalar end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  LOOM_CHECK(st != 0, "arange: step must be nonzero");
  LOOM_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "arange: upper bound (", e,
             ") and lower bound (", s, ") inconsistent with step sign (", st, ")");
  const int64_t n = static_cast<int64_t>(std::ceil((e - s) / st));
  if (!start.is_integral() || !end.is_integral() || !step.is_integral()) {
    if (options.dtype_ == kInt64) options.dtype_ = kFloat32;
  }
  return generate({n}, options, "arange", [&](int64_t i) { return s + st * i; });
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  LOOM_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  const double step = steps > 1 ? (end - start) / (steps - 1) : 0;
  // Symmetric from both ends, as PyTorch does, so the last value is exactly `end`.
  return generate({steps}, options, "linspace", [&](int64_t i) {
    return i < steps / 2 ? start + step * i : end - step * (steps - 1 - i);
  });
}

Tensor rand(IntList sizes, TensorOptions options, Generator* gen) {
  LOOM_CHECK(is_floating_point(options.dtype_), "rand: expected a floating dtype, got ",
             dtype_name(options.dtype_));
  Generator& g = pick(gen);
  check_sizes(sizes, "rand");
  if (numel_of(sizes) >= native::kCounterRandomMinNumel) {
    return generate_counter(std::move(sizes), options, g, [](auto* p, int64_t n, uint64_t key) {
      native::counter_fill_uniform(p, n, key, [](double u) { return u; });
    });
  }
  std::lock_guard<std::mutex> lock(g.mutex());
  return generate(std::move(sizes), options, "rand", [&](int64_t) { return g.uniform(); });
}

Tensor randn(IntList sizes, TensorOptions options, Generator* gen) {
  LOOM_CHECK(is_floating_point(options.dtype_), "randn: expected a floating dtype, got ",
             dtype_name(options.dtype_));
  Generator& g = pick(gen);
  check_sizes(sizes, "randn");
  if (numel_of(sizes) >= native::kCounterRandomMinNumel) {
    return generate_counter(std::move(sizes), options, g, [](auto* p, int64_t n, uint64_t key) {
      native::counter_fill_normal(p, n, key, 0.0, 1.0);
    });
  }
  std::lock_guard<std::mutex> lock(g.mutex());
  return generate(std::move(sizes), options, "randn", [&](int64_t) { return g.normal(); });
}

Tensor randint(int64_t low, int64_t high, IntList sizes, TensorOptions options, Generator* gen) {
  LOOM_CHECK(low < high, "randint: expected low < high, got low=", low, " high=", high);
  Generator& g = pick(gen);
  std::lock_guard<std::mutex> lock(g.mutex());
  return generate(std::move(sizes), options, "randint",
                  [&](int64_t) { return static_cast<double>(g.randint(low, high)); });
}

Tensor randperm(int64_t n, TensorOptions options, Generator* gen) {
  LOOM_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Generator& g = pick(gen);
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[g.randint(0, i + 1)]);
  }
  return generate({n}, options, "randperm", [&](int64_t i) { return perm[i]; });
}

namespace {
TensorOptions like_options(const Tensor& like) {
  native::check_defined("*_like", like, "like");
  return TensorOptions(like.dtype()).device(like.device());
}
}  // namespace

Tensor empty_like(const Tensor& like) { return empty(like.sizes(), like_options(like)); }
Tensor zeros_like(const Tensor& like) { return zeros(like.sizes(), like_options(like)); }
Tensor ones_like(const Tensor& like) { return ones(like.sizes(), like_options(like)); }
Tensor full_like(const Tensor& like, Scalar value) {
  return full(like.sizes(), value, like_options(like));
}
Tensor rand_like(const Tensor& like, Generator* gen) {
  return rand(like.sizes(), like_options(like), gen);
}
Tensor randn_like(const Tensor& like, Generator* gen) {
  return randn(like.sizes(), like_options(like), gen);
}

Tensor from_blob(void* data, IntList sizes, TensorOptions options,
                 std::function<void(void*)> deleter) {
  IntList strides = contiguous_strides(sizes);
  return from_blob(data, std::move(sizes), std::move(strides), options, std::move(deleter));
}

Tensor from_blob(void* data, IntList sizes, IntList strides, TensorOptions options,
                 std::function<void(void*)> deleter) {
  check_sizes(sizes, "from_blob");
  LOOM_CHECK(sizes.size() == strides.size(), "from_blob: got ", sizes.size(), " sizes but ",
             strides.size(), " strides");
  int64_t extent = 0;
  bool empty_tensor = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    empty_tensor = empty_tensor || sizes[d] == 0;
    extent += (sizes[d] - 1) * strides[d];
  }
  const size_t nbytes = empty_tensor ? 0 : (extent + 1) * element_size(options.dtype_);
  LOOM_CHECK(data != nullptr || nbytes == 0, "from_blob: data is null for a non-empty tensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage(data, nbytes, options.device_, std::move(deleter));
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->dtype = options.dtype_;
  impl->device = options.device_;
  Tensor t(impl);
  finish(t, options);
  return t;
}

Tensor tensor_from_bytes(const void* bytes, DType src_dtype, IntList sizes,
                         TensorOptions options) {
  Tensor host = empty(sizes, TensorOptions(src_dtype));
  if (host.nbytes() > 0) std::memcpy(host.data_ptr(), bytes, host.nbytes());
  Tensor out = native::to(host, options.device_, options.dtype_);
  finish(out, options);
  return out;
}

}  // namespace loom
