// 2-D convolution on cuDNN: forward, backward-data, backward-filter and the
// bias gradient, with the legacy (v7-style) cuDNN API, which covers every
// case the CPU convolution takes (stride, padding, dilation, groups; float32
// and float64).
//
// Algorithm choice is the expensive part, so it runs once per shape key
// (ConvAlgoCache.h) and pass: cudnnFind*Algorithm (times every algorithm on
// the device; it synchronises, once per shape) when cudnn_benchmark is on,
// otherwise cudnnGet*Algorithm_v7 (heuristics, no GPU work).  Of the ranked
// results, those that succeeded, respect the TF32 switch and whose
// workspace fits in half the free device memory are tried in order at the
// first call, and the first that runs is kept, with its math type and
// workspace size (as PyTorch, a candidate cuDNN refuses to run gives way to
// the next).  TF32: float32 convolutions get CUDNN_TENSOR_OP_MATH
// (tensor cores, TF32 allowed) when cudnn_allow_tf32 is on, else
// CUDNN_FMA_MATH (plain float32 FMA; CUDNN_DEFAULT_MATH would allow TF32 on
// Ampere and later); float64 ignores the switch.
//
// Descriptors are cheap and made per call (RAII, below); handles are one per
// (device, thread) (HandlePool.h), bound to the caller's stream per call; the
// workspace comes from the caller (the caching allocator).  The bias is added
// with cudnnAddTensor and its gradient is cudnnConvolutionBackwardBias when
// the caller passes them (tensor/cuda/Conv.cpp does bfloat16's and the
// channels-last ones itself).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Conv.h"
#include "tensor/cuda/ConvAlgoCache.h"
#include "tensor/cuda/HandlePool.h"

namespace loom {
namespace cuda {
namespace {

struct CudnnTag {};

cudnnHandle_t cudnn_handle(int device) {
  // Never destroyed (see HandlePool.h).
  static auto* pool = new HandlePool<cudnnHandle_t>([](int) {
    cudnnHandle_t h = nullptr;
    LOOM_CUDA_CHECK(cudnnCreate(&h));
    return h;
  });
  return thread_handle<CudnnTag>(*pool, device);
}

// ---- descriptors (RAII) --------------------------------------------------------------

class TensorDesc {
 public:
  TensorDesc() { LOOM_CUDA_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // A dense (n, c, h, w) tensor, NCHW or NHWC in memory.
  void set(cudnnDataType_t type, cudnnTensorFormat_t format, int64_t n, int64_t c, int64_t h,
           int64_t w) {
    LOOM_CUDA_CHECK(cudnnSetTensor4dDescriptor(d_, format, type, static_cast<int>(n),
                                               static_cast<int>(c), static_cast<int>(h),
                                               static_cast<int>(w)));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { LOOM_CUDA_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { LOOM_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case kFloat64: return CUDNN_DATA_DOUBLE;
    case kFloat16: return CUDNN_DATA_HALF;
    case kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

// Everything one convolution call describes: x (N, C, H, W), w (O, C/groups,
// kh, kw), y (N, O, OH, OW), bias (1, O, 1, 1); x, w and y NCHW in memory,
// or all three NHWC with g.channels_last (the weight then OHWI).
struct ConvDescriptors {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  cudnnMathType_t base_math = CUDNN_DEFAULT_MATH;  // the math type the TF32 switch asks for

  ConvDescriptors(DType dtype, const native::ConvGeometry& g, bool allow_tf32) {
    const cudnnDataType_t type = data_type(dtype);
    // 16-bit data accumulates in float32 (PyTorch's choice too).
    const cudnnDataType_t compute = type == CUDNN_DATA_DOUBLE ? type : CUDNN_DATA_FLOAT;
    const cudnnTensorFormat_t format = g.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    x.set(type, format, g.batch, g.in_channels, g.height, g.width);
    y.set(type, format, g.batch, g.out_channels, g.out_h, g.out_w);
    bias.set(type, CUDNN_TENSOR_NCHW, 1, g.out_channels, 1, 1);
    LOOM_CUDA_CHECK(cudnnSetFilter4dDescriptor(
        w.get(), type, format, static_cast<int>(g.out_channels),
        static_cast<int>(g.in_channels / g.groups), static_cast<int>(g.kernel_h),
        static_cast<int>(g.kernel_w)));
    LOOM_CUDA_CHECK(cudnnSetConvolution2dDescriptor(
        conv.get(), static_cast<int>(g.pad_h), static_cast<int>(g.pad_w),
        static_cast<int>(g.stride_h), static_cast<int>(g.stride_w),
        static_cast<int>(g.dilation_h), static_cast<int>(g.dilation_w),
        CUDNN_CROSS_CORRELATION, compute));
    LOOM_CUDA_CHECK(cudnnSetConvolutionGroupCount(conv.get(), static_cast<int>(g.groups)));
    if (dtype == kFloat32) base_math = allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    if (dtype == kFloat16 || dtype == kBFloat16) base_math = CUDNN_TENSOR_OP_MATH;
    LOOM_CUDA_CHECK(cudnnSetConvolutionMathType(conv.get(), base_math));
  }
};

// ---- algorithm choice ----------------------------------------------------------------

struct AlgoChoice {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

ConvAlgoCache<AlgoChoice>& algo_cache() {
  static auto* cache = new ConvAlgoCache<AlgoChoice>;  // never destroyed
  return *cache;
}

ConvKey key_for(DType dtype, const native::ConvGeometry& g, ConvPass pass, const ConvOptions& o) {
  ConvKeyParams p;
  p.device = o.device;
  p.dtype = static_cast<int64_t>(dtype);
  p.pass = pass;
  p.batch = g.batch;
  p.in_channels = g.in_channels;
  p.height = g.height;
  p.width = g.width;
  p.out_channels = g.out_channels;
  p.kernel_h = g.kernel_h;
  p.kernel_w = g.kernel_w;
  p.stride_h = g.stride_h;
  p.stride_w = g.stride_w;
  p.pad_h = g.pad_h;
  p.pad_w = g.pad_w;
  p.dilation_h = g.dilation_h;
  p.dilation_w = g.dilation_w;
  p.groups = g.groups;
  p.allow_tf32 = o.allow_tf32;
  p.benchmark = o.benchmark;
  p.channels_last = g.channels_last;
  return make_conv_key(p);
}

// The usable results of a ranked perf list (any of the three perf types), in
// cuDNN's order: succeeded, respecting the TF32 switch, and with a workspace
// that fits in half the free device memory.
template <typename Perf>
std::vector<AlgoChoice> usable(const Perf* perf, int count, const ConvDescriptors& d,
                               const char* pass) {
  size_t free_bytes = 0, total_bytes = 0;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t limit = std::max<size_t>(free_bytes / 2, size_t{64} << 20);
  const bool no_tensor_ops = d.base_math == CUDNN_FMA_MATH;
  std::vector<AlgoChoice> out;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (no_tensor_ops && (perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                          perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    if (perf[i].memory > limit) continue;
    AlgoChoice c;
    c.algo = static_cast<int>(perf[i].algo);
    // Without TF32 keep FMA math (DEFAULT would permit TF32 on Ampere+).
    c.math = no_tensor_ops ? CUDNN_FMA_MATH : perf[i].mathType;
    out.push_back(c);
  }
  LOOM_CHECK(!out.empty(), "conv2d: cuDNN found no usable ", pass, " algorithm for this shape (",
             count, " candidates; each failed, needs TF32 while it is disabled, or needs more "
             "than ", limit, " bytes of workspace)");
  return out;
}

constexpr int kMaxAlgos = 16;

// What differs between the three passes' algorithm searches: cuDNN's perf
// and algorithm types, its Find (benchmark) / Get (heuristics) / workspace
// calls, and the order in which they take the descriptors.
struct ForwardPass {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr ConvPass kPass = ConvPass::kForward;
  static constexpr const char* kName = "forward";
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescriptors& d, int* count, Perf* perf) {
    return cudnnFindConvolutionForwardAlgorithm(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                kMaxAlgos, count, perf);
  }
  static cudnnStatus_t get(cudnnHandle_t h, const ConvDescriptors& d, int* count, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(),
                                                  d.y.get(), kMaxAlgos, count, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo algo,
                                 size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(),
                                                   d.y.get(), algo, bytes);
  }
};

struct BackwardDataPass {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr ConvPass kPass = ConvPass::kBackwardData;
  static constexpr const char* kName = "backward-data";
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescriptors& d, int* count, Perf* perf) {
    return cudnnFindConvolutionBackwardDataAlgorithm(h, d.w.get(), d.y.get(), d.conv.get(),
                                                     d.x.get(), kMaxAlgos, count, perf);
  }
  static cudnnStatus_t get(cudnnHandle_t h, const ConvDescriptors& d, int* count, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(),
                                                       d.x.get(), kMaxAlgos, count, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo algo,
                                 size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(),
                                                        d.x.get(), algo, bytes);
  }
};

struct BackwardFilterPass {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr ConvPass kPass = ConvPass::kBackwardFilter;
  static constexpr const char* kName = "backward-filter";
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescriptors& d, int* count, Perf* perf) {
    return cudnnFindConvolutionBackwardFilterAlgorithm(h, d.x.get(), d.y.get(), d.conv.get(),
                                                       d.w.get(), kMaxAlgos, count, perf);
  }
  static cudnnStatus_t get(cudnnHandle_t h, const ConvDescriptors& d, int* count, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(),
                                                         d.w.get(), kMaxAlgos, count, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo algo,
                                 size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(),
                                                          d.w.get(), algo, bytes);
  }
};

void* workspace_for(const AlgoChoice& c, const WorkspaceFn& workspace) {
  return c.workspace > 0 ? workspace(c.workspace) : nullptr;
}

// Runs one pass over this shape: run(choice, workspace) makes the cuDNN call
// and returns its status.  The algorithm (with its math type and workspace
// size) comes from the cache; else the candidates are searched (benchmarked
// when o.benchmark, else cuDNN's heuristics) and tried in cuDNN's order, as
// PyTorch does: one that cannot run (NOT_SUPPORTED for this geometry, a
// workspace that does not fit now) gives way to the next, and the first that
// runs is cached.  A cached choice that stops working is searched again.
// An error CUDA keeps (a kernel that faulted earlier) is reported at once,
// not blamed on the candidates.
template <typename Pass, typename Run>
void run_pass(cudnnHandle_t h, DType dtype, const native::ConvGeometry& g,
              const ConvDescriptors& d, const ConvOptions& o, const WorkspaceFn& workspace,
              const Run& run) {
  // One attempt: the status of the call, or of the workspace query, or an
  // error (out of memory for the workspace) as text in `why`.
  std::string why;
  const auto attempt = [&](AlgoChoice& c, bool query) -> cudnnStatus_t {
    try {
      LOOM_CUDA_CHECK(cudnnSetConvolutionMathType(d.conv.get(), c.math));
      if (query) {
        const cudnnStatus_t q =
            Pass::workspace(h, d, static_cast<typename Pass::Algo>(c.algo), &c.workspace);
        if (q != CUDNN_STATUS_SUCCESS) return q;
      }
      const cudnnStatus_t st = run(c, workspace_for(c, workspace));
      if (st != CUDNN_STATUS_SUCCESS) {
        const cudaError_t e = cudaGetLastError();  // clears what can be cleared
        if (cudaPeekAtLastError() != cudaSuccess)
          LOOM_FAIL("conv2d: a CUDA error from earlier work stops the ", Pass::kName, " pass: ",
                    cudaGetErrorString(e), " (cuDNN said ", cudnnGetErrorString(st), ")");
      }
      return st;
    } catch (const Error& e) {
      if (std::string(e.what()).find("out of memory") == std::string::npos) throw;
      why = e.what();
      return CUDNN_STATUS_ALLOC_FAILED;
    }
  };
  const ConvKey key = key_for(dtype, g, Pass::kPass, o);
  AlgoChoice c;
  if (algo_cache().find(key, &c) && attempt(c, false) == CUDNN_STATUS_SUCCESS) return;
  // Search under the math type the switches ask for: conv2d_backward shares
  // one descriptor between its passes, so the backward-data pass has left its
  // own choice on it (perhaps CUDNN_DEFAULT_MATH, under which cuDNN does not
  // offer its tensor-core kernels), which must not narrow this search.
  LOOM_CUDA_CHECK(cudnnSetConvolutionMathType(d.conv.get(), d.base_math));
  typename Pass::Perf perf[kMaxAlgos];
  int count = 0;
  LOOM_CUDA_CHECK(o.benchmark ? Pass::find(h, d, &count, perf) : Pass::get(h, d, &count, perf));
  const std::vector<AlgoChoice> candidates = usable(perf, count, d, Pass::kName);
  cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
  for (AlgoChoice candidate : candidates) {
    last = attempt(candidate, true);
    if (last == CUDNN_STATUS_SUCCESS) {
      algo_cache().assign(key, candidate);
      return;
    }
  }
  LOOM_FAIL("conv2d: every usable cuDNN ", Pass::kName, " algorithm failed to run for this "
            "shape (", candidates.size(), " tried; the last: ", cudnnGetErrorString(last),
            why.empty() ? "" : "; ", why, ")");
}

// alpha = 1 and beta = 0 / 1 in the data type's precision (cuDNN reads
// double scaling factors for double data, float otherwise).
struct Scale {
  double d_one = 1, d_zero = 0;
  float f_one = 1, f_zero = 0;
  bool is_double;
  explicit Scale(DType dtype) : is_double(dtype == kFloat64) {}
  const void* one() const { return is_double ? static_cast<const void*>(&d_one) : &f_one; }
  const void* zero() const { return is_double ? static_cast<const void*>(&d_zero) : &f_zero; }
};

}  // namespace

void conv2d_forward(DType dtype, const native::ConvGeometry& g, const void* input,
                    const void* weight, const void* bias, void* out, const ConvOptions& o,
                    const WorkspaceFn& workspace) {
  DeviceGuard guard(o.device);
  cudnnHandle_t h = cudnn_handle(o.device);
  LOOM_CUDA_CHECK(cudnnSetStream(h, reinterpret_cast<cudaStream_t>(o.stream)));
  ConvDescriptors d(dtype, g, o.allow_tf32);
  const Scale s(dtype);
  // out (N, O, OH, OW) = conv(input (N, C, H, W), weight (O, C/groups, kh, kw))
  run_pass<ForwardPass>(h, dtype, g, d, o, workspace, [&](const AlgoChoice& c, void* ws) {
    return cudnnConvolutionForward(h, s.one(), d.x.get(), input, d.w.get(), weight, d.conv.get(),
                                   static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws,
                                   c.workspace, s.zero(), d.y.get(), out);
  });
  // out += bias (1, O, 1, 1), broadcast over N, OH, OW
  if (bias)
    LOOM_CUDA_CHECK(
        cudnnAddTensor(h, s.one(), d.bias.get(), bias, s.one(), d.y.get(), out));
}

void conv2d_backward(DType dtype, const native::ConvGeometry& g, const void* input,
                     const void* weight, const void* grad_out, void* grad_input,
                     void* grad_weight, void* grad_bias, const ConvOptions& o,
                     const WorkspaceFn& workspace) {
  DeviceGuard guard(o.device);
  cudnnHandle_t h = cudnn_handle(o.device);
  LOOM_CUDA_CHECK(cudnnSetStream(h, reinterpret_cast<cudaStream_t>(o.stream)));
  ConvDescriptors d(dtype, g, o.allow_tf32);
  const Scale s(dtype);
  if (grad_input) {
    // grad_input (N, C, H, W) from weight (O, C/groups, kh, kw) and grad_out (N, O, OH, OW)
    run_pass<BackwardDataPass>(h, dtype, g, d, o, workspace, [&](const AlgoChoice& c, void* ws) {
      return cudnnConvolutionBackwardData(
          h, s.one(), d.w.get(), weight, d.y.get(), grad_out, d.conv.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, c.workspace, s.zero(),
          d.x.get(), grad_input);
    });
  }
  if (grad_weight) {
    // grad_weight (O, C/groups, kh, kw) from input (N, C, H, W) and grad_out (N, O, OH, OW)
    run_pass<BackwardFilterPass>(h, dtype, g, d, o, workspace, [&](const AlgoChoice& c, void* ws) {
      return cudnnConvolutionBackwardFilter(
          h, s.one(), d.x.get(), input, d.y.get(), grad_out, d.conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, c.workspace, s.zero(),
          d.w.get(), grad_weight);
    });
  }
  // grad_bias (1, O, 1, 1) = grad_out (N, O, OH, OW) summed over N, OH, OW
  if (grad_bias)
    LOOM_CUDA_CHECK(cudnnConvolutionBackwardBias(h, s.one(), d.y.get(), grad_out, s.zero(),
                                                 d.bias.get(), grad_bias));
}

}  // namespace cuda
}  // namespace loom
