// CUDA device code on the host: what a .cu file sees under loom's emulator.
//
// tools/cuda/emu/nvcc_emu.py compiles each .cu with g++ after rewriting its
// launches, `k<<<grid, block, shared, stream>>>(args)`, into
// `loom_emu::launch(loom_emu::Config(grid, block, shared, stream), <k>, args)`.
// A launch is queued on its stream (a host thread); there each block runs its
// threads as fibers on one host thread, switching only at __syncthreads and
// the warp operations, so a block's threads interleave as a GPU's may and
// its barriers and shuffles mean what they mean on a GPU.  `__shared__`
// variables are thread_local statics: one copy per stream thread, shared by
// the fibers of the block that thread is running.
//
// Not emulated: warp-synchronous code without __syncwarp or a *_sync call
// (fibers of one warp do not run in lockstep), memory fences between
// concurrently running kernels, and the device's own floating-point
// intrinsics (the __CUDA_ARCH__ paths of loom's headers are not compiled;
// their host twins are).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static thread_local
#define __launch_bounds__(...)

struct CUstream_st;

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

namespace loom_emu {

// Where the running fiber is in its grid.
struct ThreadPlace {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};

// The place of the fiber running on this host thread (valid inside a kernel).
const ThreadPlace& place();

// __syncthreads: waits until every thread of the block that has not
// returned has arrived; `value` answers __syncthreads_or (any arrived
// thread's value nonzero).
int block_barrier(int value);

// The warp operations: this lane offers `bits` (up to 8 bytes), waits for
// the lanes of `mask` in its warp, and gets lane `source`'s offer (its own
// when `source` is outside the warp's lanes).
uint64_t warp_exchange(unsigned mask, uint64_t bits, int source);

// This lane's index in its warp.
int lane_id();

// A clock that counts up at about 1 GHz (for clock64).
long long device_clock();

// <<<grid, block, shared, stream>>>
struct Config {
  dim3 grid, block;
  size_t shared;
  CUstream_st* stream;
  const char* file = nullptr;  // the launch's place in the source, for fault reports
  int line = 0;
  Config(dim3 g, dim3 b, size_t s = 0, CUstream_st* st = nullptr)
      : grid(g), block(b), shared(s), stream(st) {}
  Config& at(const char* f, int l) {
    file = f;
    line = l;
    return *this;
  }
};

// Queues `body` on the config's stream, to run once per thread of the grid;
// an invalid configuration sets the calling thread's last error.
void launch_body(const Config& config, std::function<void()> body);

// A launch: the arguments are copied once, as the GPU's parameter buffer is,
// and each thread calls the kernel on them.
template <typename Kernel, typename... Args>
void launch(const Config& config, Kernel kernel, Args&&... args) {
  auto params = std::make_shared<std::tuple<std::decay_t<Args>...>>(std::forward<Args>(args)...);
  launch_body(config, [kernel, params] { std::apply(kernel, *params); });
}

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "warp shuffles move up to 8 bytes of a trivially copyable type");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

// The warp operations' common step: offers var, returns lane source's offer.
template <typename T>
T shuffle_from(unsigned mask, T var, int source) {
  return from_bits<T>(warp_exchange(mask, to_bits(var), source));
}

// The bits of v as a To of the same size (the __float_as_uint family).
template <typename To, typename From>
To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
  To out;
  std::memcpy(&out, &v, sizeof(To));
  return out;
}

}  // namespace loom_emu

#define threadIdx (::loom_emu::place().thread_idx)
#define blockIdx (::loom_emu::place().block_idx)
#define blockDim (::loom_emu::place().block_dim)
#define gridDim (::loom_emu::place().grid_dim)
static constexpr int warpSize = 32;

inline void __syncthreads() { ::loom_emu::block_barrier(0); }
inline int __syncthreads_or(int predicate) {
  return ::loom_emu::block_barrier(predicate != 0);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::loom_emu::warp_exchange(mask, 0, 0);
}

// The source lanes are PTX's shfl.sync's (width a power of two up to 32,
// splitting the warp into segments): __shfl_sync reads lane src_lane of the
// caller's segment (src_lane taken modulo width, negative ones too); down and
// up read delta lanes away within the segment; xor reads lane ^ lane_mask,
// which may lie in an earlier segment but not a later one.  A lane whose
// source is out of bounds gets its own value.
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  const int lane = ::loom_emu::lane_id();
  const int base = lane & ~(width - 1);
  return ::loom_emu::shuffle_from(mask, var, base | (src_lane & (width - 1)));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::loom_emu::lane_id();
  const int within = lane % width;
  const int d = static_cast<int>(delta);
  return ::loom_emu::shuffle_from(mask, var, within + d < width ? lane + d : lane);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::loom_emu::lane_id();
  const int within = lane % width;
  const int d = static_cast<int>(delta);
  return ::loom_emu::shuffle_from(mask, var, within >= d ? lane - d : lane);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  const int lane = ::loom_emu::lane_id();
  const int last = (lane & ~(width - 1)) + width - 1;  // the end of the caller's segment
  const int source = lane ^ (lane_mask & 31);
  return ::loom_emu::shuffle_from(mask, var, source <= last ? source : lane);
}

// Atomics: a block's fibers share one host thread, and blocks of one grid
// run one after another, but kernels on two streams run on two host
// threads at once, so these are real atomic operations.
template <typename T>
T atomicAdd(T* address, T value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}
template <typename F>
F atomic_add_floating(F* address, F value) {
  F old;
  __atomic_load(address, &old, __ATOMIC_SEQ_CST);
  F desired = old + value;
  while (!__atomic_compare_exchange(address, &old, &desired, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
    desired = old + value;
  return old;
}
inline float atomicAdd(float* address, float value) { return atomic_add_floating(address, value); }
inline double atomicAdd(double* address, double value) {
  return atomic_add_floating(address, value);
}
template <typename T>
T atomicMin(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (value < old &&
         !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
T atomicMax(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (value > old &&
         !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
  }
  return old;
}
template <typename T>
T atomicOr(T* address, T value) {
  return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicAnd(T* address, T value) {
  return __atomic_fetch_and(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicExch(T* address, T value) {
  return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  return compare;  // the old value either way
}

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline long long clock64() { return ::loom_emu::device_clock(); }

// Intrinsics with one rounding (g++ compiles .cu files with
// -ffp-contract=off, so a plain expression rounds once).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return static_cast<unsigned int>((static_cast<uint64_t>(a) * b) >> 32);
}
inline unsigned int __float_as_uint(float v) { return ::loom_emu::bit_cast<unsigned int>(v); }
inline float __uint_as_float(unsigned int v) { return ::loom_emu::bit_cast<float>(v); }
inline int __float_as_int(float v) { return ::loom_emu::bit_cast<int>(v); }
inline float __int_as_float(int v) { return ::loom_emu::bit_cast<float>(v); }
inline long long __double_as_longlong(double v) { return ::loom_emu::bit_cast<long long>(v); }
inline double __longlong_as_double(long long v) { return ::loom_emu::bit_cast<double>(v); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}

// The CUDA math library's global functions device code calls unqualified.
using std::isfinite;
using std::isinf;
using std::isnan;
using std::max;
using std::min;
inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
inline double rsqrt(double v) { return 1.0 / std::sqrt(v); }
