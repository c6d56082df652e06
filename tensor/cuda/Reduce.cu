// CUDA reductions over a contiguous (outer, reduce, inner) block (see Reduce.h).
//
// Two kernels, both generic over a reduction policy (identity, step over one
// input value at position r, combine of two partial results):
//   - rows (inner == 1): each output reduces one contiguous run of `reduce`
//     values.  A group of threads (one warp for short runs, the whole
//     256-thread block for long ones) strides over the run, then the group
//     combines its partials in a shared-memory tree.
//   - columns (inner > 1): a 32 x 8 block; x walks 32 adjacent outputs (so
//     loads coalesce along inner), y splits the reduced axis in 8 strided
//     parts, combined in shared memory at the end.
// When the outputs are too few to fill the GPU (a full sum, a sum over the
// batch of a few columns), the reduced axis is cut into chunks
// (ReducePlan.h): grid z picks the chunk, each block writes its partial
// result to scratch, and reduce_combine folds each output's chunks in order.
// Grid-stride loops over outputs keep the grid within CUDA's limits; every
// loop bound is uniform across a block, so each __syncthreads is reached by
// all its threads.  Partial results combine in a fixed tree order, so the
// result is deterministic run to run (but float sums round differently from
// the CPU's order; they accumulate in double to make that negligible).
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Reduce.h"
#include "tensor/cuda/ReducePlan.h"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = kReduceThreads;
constexpr int kColumnsX = kReduceColumnsX;
constexpr int kColumnsY = kThreads / kColumnsX;
// Runs up to this long get one warp each instead of one block.
constexpr int64_t kWarpRunLimit = kReduceWarpRunLimit;


// ---- policies ----------------------------------------------------------------------

// Sum in Acc (double for floating inputs, int64 otherwise); writes Out.
template <typename T, typename Acc, typename Out>
struct SumPolicy {
  using acc_t = Acc;
  Out* out;
  bool mean;
  double count;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc step(Acc acc, T v, int64_t) const { return acc + static_cast<Acc>(v); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void write(int64_t k, Acc acc) const {
    if constexpr (std::is_floating_point<Acc>::value)
      out[k] = static_cast<Out>(mean ? acc / count : acc);
    else
      out[k] = static_cast<Out>(acc);
  }
};

template <typename T>
struct ValueIndex {
  T value;
  int64_t index;
};

template <typename T>
__device__ __forceinline__ bool is_nan(T v) {
  if constexpr (std::is_floating_point<T>::value) return v != v;
  else return false;
}

// Max or min with its first index; NaN beats every number, and of two NaNs or
// two equal values the lower index wins (so the tree gives the CPU's answer).
template <typename T>
struct ExtremumPolicy {
  using acc_t = ValueIndex<T>;
  T* values;
  int64_t* indices;
  bool is_max;
  T start;  // -inf / +inf, or the integer type's lowest / highest
  __device__ acc_t identity() const { return {start, std::numeric_limits<int64_t>::max()}; }
  __device__ bool better(const acc_t& b, const acc_t& a) const {
    const bool an = is_nan(a.value), bn = is_nan(b.value);
    if (an || bn) return bn && (!an || b.index < a.index);
    if (b.value == a.value) return b.index < a.index;
    return is_max ? b.value > a.value : b.value < a.value;
  }
  __device__ acc_t step(acc_t acc, T v, int64_t r) const {
    const acc_t c{v, r};
    return better(c, acc) ? c : acc;
  }
  __device__ acc_t combine(acc_t a, acc_t b) const { return better(b, a) ? b : a; }
  __device__ void write(int64_t k, const acc_t& acc) const {
    if (values) values[k] = acc.value;
    if (indices) indices[k] = acc.index;
  }
};

// ---- kernels -----------------------------------------------------------------------

// Chunk blockIdx.z of the reduced axis: values [begin, end).  With one chunk
// the block writes its outputs; with several, its partial result for output
// k goes to partial[k * splits + chunk].
template <typename Acc>
struct Chunks {
  int64_t splits, chunk;
  Acc* partial;
  __device__ int64_t begin() const { return static_cast<int64_t>(blockIdx.z) * chunk; }
  __device__ int64_t end(int64_t reduce) const {
    const int64_t e = begin() + chunk;
    return e < reduce ? e : reduce;
  }
  template <typename P>
  __device__ void put(const P& p, int64_t k, const Acc& acc) const {
    if (splits == 1) p.write(k, acc);
    else partial[k * splits + blockIdx.z] = acc;
  }
};

// inner == 1: groups of `group` threads (32 or kThreads) each reduce one row.
template <typename T, typename P>
__global__ void reduce_rows(const T* __restrict__ src, int64_t outer, int64_t reduce, int group,
                            P p, Chunks<typename P::acc_t> chunks) {
  using Acc = typename P::acc_t;
  __shared__ Acc partial[kThreads];
  const int t = threadIdx.x;
  const int lane = t % group;
  const int groups = kThreads / group;
  const int64_t r0 = chunks.begin(), r1 = chunks.end(reduce);
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * groups; base < outer;
       base += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t row = base + t / group;
    Acc acc = p.identity();
    if (row < outer) {
      const T* x = src + row * reduce;
      for (int64_t r = r0 + lane; r < r1; r += group) acc = p.step(acc, x[r], r);
    }
    partial[t] = acc;
    __syncthreads();
    for (int s = group / 2; s > 0; s >>= 1) {
      if (lane < s) partial[t] = p.combine(partial[t], partial[t + s]);
      __syncthreads();
    }
    if (lane == 0 && row < outer) chunks.put(p, row, partial[t]);
    __syncthreads();  // partial is rewritten by the next iteration
  }
}

// inner > 1: a kColumnsX x kColumnsY block reduces kColumnsX adjacent outputs.
template <typename T, typename P>
__global__ void reduce_columns(const T* __restrict__ src, int64_t outer, int64_t reduce,
                               int64_t inner, P p, Chunks<typename P::acc_t> chunks) {
  using Acc = typename P::acc_t;
  __shared__ Acc partial[kColumnsY][kColumnsX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t r0 = chunks.begin(), r1 = chunks.end(reduce);
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * kColumnsX; base < inner;
         base += static_cast<int64_t>(gridDim.x) * kColumnsX) {
      const int64_t i = base + tx;
      Acc acc = p.identity();
      if (i < inner) {
        const T* x = src + o * reduce * inner + i;
        for (int64_t r = r0 + ty; r < r1; r += kColumnsY) acc = p.step(acc, x[r * inner], r);
      }
      partial[ty][tx] = acc;
      __syncthreads();
      for (int s = kColumnsY / 2; s > 0; s >>= 1) {
        if (ty < s) partial[ty][tx] = p.combine(partial[ty][tx], partial[ty + s][tx]);
        __syncthreads();
      }
      if (ty == 0 && i < inner) chunks.put(p, o * inner + i, partial[0][tx]);
      __syncthreads();
    }
  }
}

// Output k = its chunks' partial results combined in chunk order.
template <typename P>
__global__ void reduce_combine(const typename P::acc_t* __restrict__ partial, int64_t outputs,
                               int64_t splits, P p) {
  LOOM_CUDA_GRID_STRIDE(k, outputs) {
    typename P::acc_t acc = partial[k * splits];
    for (int64_t t = 1; t < splits; ++t) acc = p.combine(acc, partial[k * splits + t]);
    p.write(k, acc);
  }
}

template <typename T, typename P>
void launch(const void* src, int64_t outer, int64_t reduce, int64_t inner, const P& p,
            void* scratch, int device, uint64_t stream) {
  using Acc = typename P::acc_t;
  static_assert(sizeof(Acc) <= kReducePartialBytes, "a partial result outgrows its scratch");
  if (outer * inner == 0) return;
  DeviceGuard guard(device);
  const T* x = static_cast<const T*>(src);
  cudaStream_t s = as_stream(stream);
  const ReducePlan plan = plan_reduce(outer, reduce, inner, multiprocessors(device));
  LOOM_CHECK(plan.splits == 1 || scratch, "cuda::reduce: ", plan.splits,
             " chunks need scratch memory (reduce_scratch_bytes)");
  const Chunks<Acc> chunks{plan.splits, plan.chunk, static_cast<Acc*>(scratch)};
  const unsigned z = static_cast<unsigned>(plan.splits);
  if (inner == 1) {
    const int group = plan.chunk <= kWarpRunLimit ? 32 : kThreads;
    const dim3 grid(blocks_for(outer, kThreads / group), 1, z);
    reduce_rows<T, P><<<grid, kThreads, 0, s>>>(x, outer, reduce, group, p, chunks);
  } else {
    const dim3 block(kColumnsX, kColumnsY);
    const dim3 grid(blocks_for(inner, kColumnsX), grid_for(outer), z);
    reduce_columns<T, P><<<grid, block, 0, s>>>(x, outer, reduce, inner, p, chunks);
  }
  LOOM_CUDA_CHECK(cudaGetLastError());
  if (plan.splits == 1) return;
  const int64_t outputs = outer * inner;
  reduce_combine<P><<<blocks_for(outputs, kThreads), kThreads, 0, s>>>(chunks.partial, outputs,
                                                                       plan.splits, p);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

int64_t reduce_scratch_bytes(int64_t outer, int64_t reduce, int64_t inner, int device) {
  if (outer * inner == 0) return 0;
  const ReducePlan plan = plan_reduce(outer, reduce, inner, multiprocessors(device));
  return plan.splits == 1 ? 0 : kReducePartialBytes * outer * inner * plan.splits;
}

void sum(DType dtype, const void* src, void* out, int64_t outer, int64_t reduce, int64_t inner,
         bool mean, void* scratch, int device, uint64_t stream) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point<T>::value) {
      const SumPolicy<T, double, T> p{static_cast<T*>(out), mean, static_cast<double>(reduce)};
      launch<T>(src, outer, reduce, inner, p, scratch, device, stream);
    } else {
      const SumPolicy<T, int64_t, int64_t> p{static_cast<int64_t*>(out), false, 0.0};
      launch<T>(src, outer, reduce, inner, p, scratch, device, stream);
    }
  });
}

void extremum(DType dtype, const void* src, void* values, int64_t* indices, int64_t outer,
              int64_t reduce, int64_t inner, bool is_max, void* scratch, int device,
              uint64_t stream) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T start;
    if constexpr (std::is_floating_point<T>::value)
      start = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      start = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    const ExtremumPolicy<T> p{static_cast<T*>(values), indices, is_max, start};
    launch<T>(src, outer, reduce, inner, p, scratch, device, stream);
  });
}

}  // namespace cuda
}  // namespace loom
