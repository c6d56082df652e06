// CUDA optimizer steps (see Optim.h): SGD (momentum, dampening, nesterov,
// weight decay, maximize) and Adam/AdamW (amsgrad), multi-tensor.
//
// A launch takes up to kMaxListTensors parameters and kMaxChunkBlocks
// blocks, each block one 64K-element chunk of one parameter
// (TensorChunks.cuh: PyTorch's multi_tensor_apply layout), so a list of one
// large and many small parameters launches only the blocks it needs.  The
// lists are kernel arguments (Adam's float64 list with its chunk map is
// ~4.7 KB, within the 32 KB that CUDA >= 12.1 allows), so no host-to-device
// copy and no synchronisation is needed.
//
// Each element runs tensor/cpu/Optim.cpp's statements in order with round-to-
// nearest intrinsics (__fmul_rn, __dadd_rn, ...), which nvcc never fuses into
// FMAs; division and sqrt are the IEEE ones (nvcc's defaults without
// --use_fast_math), so results equal the CPU's (built with -ffp-contract=off).
#include <cuda_runtime.h>

#include <algorithm>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Optim.h"
#include "tensor/cuda/TensorChunks.cuh"

namespace loom {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxListTensors = 48;


// One rounding per operation.
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float root(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double root(double a) { return __dsqrt_rn(a); }

template <typename T>
struct SgdList {
  ChunkMap map;
  T* params[kMaxListTensors];
  const T* grads[kMaxListTensors];
  T* bufs[kMaxListTensors];
  int64_t numels[kMaxListTensors];
  bool first[kMaxListTensors];
};

template <typename T>
struct SgdArgs {
  T lr, wd, mom, damp;
  bool use_wd, use_mom, nesterov, maximize;
};

template <typename T>
__global__ void sgd_kernel(SgdList<T> list, SgdArgs<T> a) {
  const BlockRange r = block_range(list.map, list.numels);
  const int k = r.slot;
  T* w = list.params[k];
  const T* g = list.grads[k];
  T* m = list.bufs[k];
  const bool first = list.first[k];
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    T d = a.maximize ? -g[i] : g[i];
    if (a.use_wd) d = add(d, mul(a.wd, w[i]));
    if (a.use_mom) {
      if (first) {
        m[i] = d;
      } else {
        const T decayed = mul(m[i], a.mom);
        m[i] = add(decayed, mul(a.damp, d));
      }
      d = a.nesterov ? add(d, mul(a.mom, m[i])) : m[i];
    }
    w[i] = sub(w[i], mul(a.lr, d));
  }
}

template <typename T>
struct AdamList {
  ChunkMap map;
  T* params[kMaxListTensors];
  const T* grads[kMaxListTensors];
  T* exp_avgs[kMaxListTensors];
  T* exp_avg_sqs[kMaxListTensors];
  T* max_exp_avg_sqs[kMaxListTensors];
  int64_t numels[kMaxListTensors];
  T neg_step[kMaxListTensors];
  T bc2[kMaxListTensors];
};

template <typename T>
struct AdamArgs {
  T b1, b2, one_minus_b1, one_minus_b2, wd, decay, eps;
  bool use_wd, decoupled, maximize;
};

template <typename T>
__global__ void adam_kernel(AdamList<T> list, AdamArgs<T> a) {
  const BlockRange r = block_range(list.map, list.numels);
  const int k = r.slot;
  T* w = list.params[k];
  const T* g = list.grads[k];
  T* m = list.exp_avgs[k];
  T* v = list.exp_avg_sqs[k];
  T* vmax = list.max_exp_avg_sqs[k];
  const T neg_step = list.neg_step[k], bc2 = list.bc2[k];
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    T gi = a.maximize ? -g[i] : g[i];
    if (a.use_wd) {
      if (a.decoupled) w[i] = mul(w[i], a.decay);
      else gi = add(gi, mul(a.wd, w[i]));
    }
    const T m_decayed = mul(m[i], a.b1);
    m[i] = add(m_decayed, mul(a.one_minus_b1, gi));
    const T v_decayed = mul(v[i], a.b2);
    v[i] = add(v_decayed, mul(a.one_minus_b2, mul(gi, gi)));
    T second = v[i];
    if (vmax) {
      vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
      second = vmax[i];
    }
    const T denom = add(div(root(second), bc2), a.eps);
    w[i] = add(w[i], mul(neg_step, div(m[i], denom)));
  }
}

}  // namespace

void sgd_step(DType dtype, int count, void* const* params, const void* const* grads,
              void* const* bufs, const bool* first, const int64_t* numels,
              const SgdConstants& c, int device, uint64_t stream) {
  if (count == 0) return;
  DeviceGuard guard(device);
  dispatch_floating(dtype, "SGD", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const SgdArgs<T> a{static_cast<T>(c.lr),       static_cast<T>(c.weight_decay),
                       static_cast<T>(c.momentum), static_cast<T>(c.one_minus_dampening),
                       c.use_weight_decay,         c.use_momentum,
                       c.nesterov,                 c.maximize};
    SgdList<T> list{};
    for_each_chunk_list(
        count, numels, kMaxListTensors, list.map,
        [&](int j, int k) {
          list.params[j] = static_cast<T*>(params[k]);
          list.grads[j] = static_cast<const T*>(grads[k]);
          list.bufs[j] = bufs ? static_cast<T*>(bufs[k]) : nullptr;
          list.first[j] = first ? first[k] : false;
          list.numels[j] = numels[k];
        },
        [&](int blocks) {
          sgd_kernel<T><<<blocks, kThreads, 0, as_stream(stream)>>>(list, a);
          LOOM_CUDA_CHECK(cudaGetLastError());
        });
  });
}

void adam_step(DType dtype, int count, void* const* params, const void* const* grads,
               void* const* exp_avgs, void* const* exp_avg_sqs, void* const* max_exp_avg_sqs,
               const double* neg_step_size, const double* bias_correction2_sqrt,
               const int64_t* numels, const AdamConstants& c, int device, uint64_t stream) {
  if (count == 0) return;
  DeviceGuard guard(device);
  dispatch_floating(dtype, "Adam", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamArgs<T> a{static_cast<T>(c.beta1),           static_cast<T>(c.beta2),
                        static_cast<T>(c.one_minus_beta1), static_cast<T>(c.one_minus_beta2),
                        static_cast<T>(c.weight_decay),    static_cast<T>(c.decay),
                        static_cast<T>(c.eps),             c.use_weight_decay,
                        c.decoupled,                       c.maximize};
    AdamList<T> list{};
    for_each_chunk_list(
        count, numels, kMaxListTensors, list.map,
        [&](int j, int k) {
          list.params[j] = static_cast<T*>(params[k]);
          list.grads[j] = static_cast<const T*>(grads[k]);
          list.exp_avgs[j] = static_cast<T*>(exp_avgs[k]);
          list.exp_avg_sqs[j] = static_cast<T*>(exp_avg_sqs[k]);
          list.max_exp_avg_sqs[j] = max_exp_avg_sqs ? static_cast<T*>(max_exp_avg_sqs[k]) : nullptr;
          list.numels[j] = numels[k];
          list.neg_step[j] = static_cast<T>(neg_step_size[k]);
          list.bc2[j] = static_cast<T>(bias_correction2_sqrt[k]);
        },
        [&](int blocks) {
          adam_kernel<T><<<blocks, kThreads, 0, as_stream(stream)>>>(list, a);
          LOOM_CUDA_CHECK(cudaGetLastError());
        });
  });
}

}  // namespace cuda
}  // namespace loom
