// cuDNN's computing calls, for loom's CUDA emulator: the 2-d convolution
// passes (cudnnConvolutionForward, cudnnConvolutionBackwardData,
// cudnnConvolutionBackwardFilter), cudnnAddTensor and
// cudnnConvolutionBackwardBias -- their loops and how they are queued on the
// handle's stream.  See CudnnState.h for the rest of cuDNN.
//
// The passes are direct loops.  Operands are first gathered (through their
// strides, so NCHW, NHWC and any other 4-d layout work) into contiguous
// NCHW / KCRS arrays of the accumulation type (float, or double for double
// data; float32 inputs rounded to TF32 where the math type allows it), each
// output element is accumulated in that type by one host thread in a fixed
// order (deterministic results), and the result is written as alpha * result
// + beta * old (old not read when beta is 0), rounded once to the data type.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "CudnnState.h"
#include "HostMath.h"
#include "loom_emu/Stream.h"

namespace loom_emu {
namespace cudnn {
namespace {

// ---- data types --------------------------------------------------------------------------------

template <typename Acc>
Acc load(const void* p, cudnnDataType_t t, int64_t i) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return static_cast<Acc>(static_cast<const float*>(p)[i]);
    case CUDNN_DATA_DOUBLE: return static_cast<Acc>(static_cast<const double*>(p)[i]);
    case CUDNN_DATA_HALF:
      return static_cast<Acc>(libs::half_to_float(static_cast<const uint16_t*>(p)[i]));
    case CUDNN_DATA_BFLOAT16:
      return static_cast<Acc>(libs::bf16_to_float(static_cast<const uint16_t*>(p)[i]));
    default: return Acc(0);
  }
}

template <typename Acc>
void store(void* p, cudnnDataType_t t, int64_t i, Acc v) {
  switch (t) {
    case CUDNN_DATA_FLOAT: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case CUDNN_DATA_DOUBLE: static_cast<double*>(p)[i] = static_cast<double>(v); return;
    case CUDNN_DATA_HALF:
      static_cast<uint16_t*>(p)[i] = libs::float_to_half(static_cast<float>(v));
      return;
    case CUDNN_DATA_BFLOAT16:
      static_cast<uint16_t*>(p)[i] = libs::float_to_bf16(static_cast<float>(v));
      return;
    default: return;
  }
}

// Reads a scaling factor: double for double data, float otherwise.
double scalar(const void* p, cudnnDataType_t data) {
  return data == CUDNN_DATA_DOUBLE ? *static_cast<const double*>(p)
                                   : static_cast<double>(*static_cast<const float*>(p));
}

// ---- the passes --------------------------------------------------------------------------------

// A's elements in (d0, d1, d2, d3) order, contiguous, in the accumulation type.
template <typename Acc>
std::vector<Acc> gather(const void* p, cudnnDataType_t t, const Dims4& d, bool tf32) {
  std::vector<Acc> out(static_cast<size_t>(d.count()));
  size_t i = 0;
  for (int64_t a = 0; a < d.d[0]; ++a)
    for (int64_t b = 0; b < d.d[1]; ++b)
      for (int64_t c = 0; c < d.d[2]; ++c)
        for (int64_t e = 0; e < d.d[3]; ++e) {
          Acc v = load<Acc>(p, t, d.at(a, b, c, e));
          if (tf32) v = static_cast<Acc>(libs::round_to_tf32(static_cast<float>(v)));
          out[i++] = v;
        }
  return out;
}

// out = alpha * result + beta * out, through out's strides, rounded once.
template <typename Acc>
void scatter(void* p, cudnnDataType_t t, const Dims4& d, const std::vector<Acc>& result, Acc alpha,
             Acc beta) {
  size_t i = 0;
  for (int64_t a = 0; a < d.d[0]; ++a)
    for (int64_t b = 0; b < d.d[1]; ++b)
      for (int64_t c = 0; c < d.d[2]; ++c)
        for (int64_t e = 0; e < d.d[3]; ++e) {
          const int64_t at = d.at(a, b, c, e);
          Acc v = alpha * result[i++];
          if (beta != Acc(0)) v += beta * load<Acc>(p, t, at);
          store<Acc>(p, t, at, v);
        }
}

// The filter index of tap r of a kernel of size n (flipped for CUDNN_CONVOLUTION).
inline int64_t tap(bool flip, int64_t r, int64_t n) { return flip ? n - 1 - r : r; }

// The outputs [*lo, *hi) of `out` whose tap at `offset` (r * dilation - pad)
// reads inside an input of size `in`: 0 <= p * stride + offset < in.
inline void valid_range(int64_t out, int64_t stride, int64_t offset, int64_t in, int64_t* lo,
                        int64_t* hi) {
  const auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
  *lo = std::max<int64_t>(0, ceil_div(-offset, stride));
  *hi = std::min<int64_t>(out, ceil_div(in - offset, stride));
  if (*hi < *lo) *hi = *lo;
}

// y (N, K, P, Q) = sum over c, r, s of x(n, g * Cg + c, p * sh - ph + r * dh, ...) * w(k, c, r, s)
template <typename Acc>
void forward(const Conv& c, Acc alpha, Acc beta, const void* x, const void* w, void* y) {
  const std::vector<Acc> X = gather<Acc>(x, c.type, c.x, c.tf32);
  const std::vector<Acc> W = gather<Acc>(w, c.type, c.w, c.tf32);
  const int64_t N = c.x.d[0], C = c.x.d[1], H = c.x.d[2], Wd = c.x.d[3];
  const int64_t K = c.w.d[0], Cg = c.w.d[1], R = c.w.d[2], S = c.w.d[3];
  const int64_t P = c.y.d[2], Q = c.y.d[3], Kg = K / c.groups;
  std::vector<Acc> out(static_cast<size_t>(N * K * P * Q), Acc(0));
  libs::parallel_for(N * K, static_cast<double>(P * Q * Cg * R * S), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / K, k = i % K, g = k / Kg;
      Acc* plane = &out[static_cast<size_t>(i * P * Q)];
      for (int64_t ci = 0; ci < Cg; ++ci) {
        const Acc* xp = &X[static_cast<size_t>((n * C + g * Cg + ci) * H * Wd)];
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s = 0; s < S; ++s) {
            const Acc wv = W[static_cast<size_t>(((k * Cg + ci) * R + tap(c.flip, r, R)) * S +
                                                 tap(c.flip, s, S))];
            const int64_t oh = r * c.dilation[0] - c.pad[0], ow = s * c.dilation[1] - c.pad[1];
            int64_t p0, p1, q0, q1;
            valid_range(P, c.stride[0], oh, H, &p0, &p1);
            valid_range(Q, c.stride[1], ow, Wd, &q0, &q1);
            for (int64_t p = p0; p < p1; ++p) {
              const Acc* xrow = xp + (p * c.stride[0] + oh) * Wd + ow;
              Acc* orow = plane + p * Q;
              for (int64_t q = q0; q < q1; ++q) orow[q] += xrow[q * c.stride[1]] * wv;
            }
          }
      }
    }
  });
  scatter<Acc>(y, c.type, c.y, out, alpha, beta);
}

// dx (N, C, H, W): every dy(n, k, p, q) * w(k, c, r, s) lands on the input
// element tap (r, s) of output (p, q) read.
template <typename Acc>
void backward_data(const Conv& c, Acc alpha, Acc beta, const void* w, const void* dy, void* dx) {
  const std::vector<Acc> W = gather<Acc>(w, c.type, c.w, c.tf32);
  const std::vector<Acc> DY = gather<Acc>(dy, c.type, c.y, c.tf32);
  const int64_t N = c.x.d[0], C = c.x.d[1], H = c.x.d[2], Wd = c.x.d[3];
  const int64_t K = c.w.d[0], Cg = c.w.d[1], R = c.w.d[2], S = c.w.d[3];
  const int64_t P = c.y.d[2], Q = c.y.d[3], Kg = K / c.groups;
  std::vector<Acc> out(static_cast<size_t>(N * C * H * Wd), Acc(0));
  libs::parallel_for(N * C, static_cast<double>(Kg * R * S * P * Q), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / C, ch = i % C, g = ch / Cg, ci = ch % Cg;
      Acc* plane = &out[static_cast<size_t>(i * H * Wd)];
      for (int64_t k = g * Kg; k < (g + 1) * Kg; ++k) {
        const Acc* dyp = &DY[static_cast<size_t>((n * K + k) * P * Q)];
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s = 0; s < S; ++s) {
            const Acc wv = W[static_cast<size_t>(((k * Cg + ci) * R + tap(c.flip, r, R)) * S +
                                                 tap(c.flip, s, S))];
            const int64_t oh = r * c.dilation[0] - c.pad[0], ow = s * c.dilation[1] - c.pad[1];
            int64_t p0, p1, q0, q1;
            valid_range(P, c.stride[0], oh, H, &p0, &p1);
            valid_range(Q, c.stride[1], ow, Wd, &q0, &q1);
            for (int64_t p = p0; p < p1; ++p) {
              Acc* xrow = plane + (p * c.stride[0] + oh) * Wd + ow;
              const Acc* dyrow = dyp + p * Q;
              for (int64_t q = q0; q < q1; ++q) xrow[q * c.stride[1]] += dyrow[q] * wv;
            }
          }
      }
    }
  });
  scatter<Acc>(dx, c.type, c.x, out, alpha, beta);
}

// dw (K, Cg, R, S) = sum over n, p, q of dy(n, k, p, q) * x(n, g * Cg + c, tap (r, s) of (p, q))
template <typename Acc>
void backward_filter(const Conv& c, Acc alpha, Acc beta, const void* x, const void* dy,
                     void* dw) {
  const std::vector<Acc> X = gather<Acc>(x, c.type, c.x, c.tf32);
  const std::vector<Acc> DY = gather<Acc>(dy, c.type, c.y, c.tf32);
  const int64_t N = c.x.d[0], C = c.x.d[1], H = c.x.d[2], Wd = c.x.d[3];
  const int64_t K = c.w.d[0], Cg = c.w.d[1], R = c.w.d[2], S = c.w.d[3];
  const int64_t P = c.y.d[2], Q = c.y.d[3], Kg = K / c.groups;
  std::vector<Acc> out(static_cast<size_t>(K * Cg * R * S), Acc(0));
  libs::parallel_for(K * Cg, static_cast<double>(R * S * N * P * Q), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t k = i / Cg, ci = i % Cg, g = k / Kg;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t oh = r * c.dilation[0] - c.pad[0], ow = s * c.dilation[1] - c.pad[1];
          int64_t p0, p1, q0, q1;
          valid_range(P, c.stride[0], oh, H, &p0, &p1);
          valid_range(Q, c.stride[1], ow, Wd, &q0, &q1);
          Acc acc = 0;
          for (int64_t n = 0; n < N; ++n) {
            const Acc* xp = &X[static_cast<size_t>((n * C + g * Cg + ci) * H * Wd)];
            const Acc* dyp = &DY[static_cast<size_t>((n * K + k) * P * Q)];
            for (int64_t p = p0; p < p1; ++p) {
              const Acc* xrow = xp + (p * c.stride[0] + oh) * Wd + ow;
              const Acc* dyrow = dyp + p * Q;
              for (int64_t q = q0; q < q1; ++q) acc += dyrow[q] * xrow[q * c.stride[1]];
            }
          }
          out[static_cast<size_t>(((k * Cg + ci) * R + tap(c.flip, r, R)) * S +
                                  tap(c.flip, s, S))] = acc;
        }
    }
  });
  scatter<Acc>(dw, c.type, c.w, out, alpha, beta);
}

// Writes the workspace the algorithm claimed, as a real kernel may.
void touch_workspace(void* workspace, size_t bytes) {
  if (workspace != nullptr && bytes > 0) std::memset(workspace, 0x5A, bytes);
}

// The checks and queueing the three convolution calls share.  run(alpha,
// beta) is called on the stream with the factors in the accumulation type.
template <typename Run>
cudnnStatus_t launch(const char* fn, Pass pass, cudnnHandle_t handle, const void* alpha,
                     const void* beta, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                     const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, int algo,
                     void* workspace, size_t workspace_size, bool pointers_ok, const Run& run) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  Conv c;
  const cudnnStatus_t checked = check_conv(fn, x, w, conv, y, &c);
  if (checked != CUDNN_STATUS_SUCCESS) return checked;
  if (alpha == nullptr || beta == nullptr || !pointers_ok)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a data pointer or alpha/beta is NULL");
  size_t needed = 0;
  const cudnnStatus_t ws = algo_workspace(fn, pass, algo, c, &needed);
  if (ws != CUDNN_STATUS_SUCCESS) return ws;
  if (workspace == nullptr && workspace_size > 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "workSpace is NULL but workSpaceSizeInBytes is not 0");
  if (workspace_size < needed)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
                "algorithm " + std::to_string(algo) + " needs " + std::to_string(needed) +
                    " bytes of workspace, " + std::to_string(workspace_size) + " given");
  const double a = scalar(alpha, c.type), b = scalar(beta, c.type);
  const bool in_double = c.type == CUDNN_DATA_DOUBLE;
  enqueue(handle->stream, [c, a, b, in_double, workspace, needed, run] {
    touch_workspace(workspace, needed);
    if (in_double)
      run(c, a, b);
    else
      run(c, static_cast<float>(a), static_cast<float>(b));
  });
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace cudnn
}  // namespace loom_emu

using loom_emu::cudnn::Dims4;
using loom_emu::cudnn::fail;
using loom_emu::cudnn::is_live;
using loom_emu::cudnn::Pass;

extern "C" {

// ---- tensors ---------------------------------------------------------------------------------

cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha,
                             const cudnnTensorDescriptor_t aDesc, const void* A, const void* beta,
                             const cudnnTensorDescriptor_t cDesc, void* C) {
  const char* fn = "cudnnAddTensor";
  using namespace loom_emu::cudnn;
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  if (aDesc == nullptr || cDesc == nullptr || !aDesc->set || !cDesc->set)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor is NULL or unset");
  if (alpha == nullptr || beta == nullptr || A == nullptr || C == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a data pointer or alpha/beta is NULL");
  if (aDesc->type != cDesc->type)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "A and C have different data types");
  if (!is_computable(cDesc->type))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "data type " + std::to_string(cDesc->type));
  const Dims4 a = aDesc->dims, c = cDesc->dims;
  for (int i = 0; i < 4; ++i)
    if (a.d[i] != c.d[i] && a.d[i] != 1)
      return fail(CUDNN_STATUS_BAD_PARAM, fn,
                  "A " + dims_text(a) + " does not broadcast to C " + dims_text(c));
  const cudnnDataType_t type = cDesc->type;
  const double al = scalar(alpha, type), be = scalar(beta, type);
  const auto run = [a, c, type, A, C](auto alpha_v, auto beta_v) {
    using Acc = decltype(alpha_v);
    for (int64_t n = 0; n < c.d[0]; ++n)
      for (int64_t ch = 0; ch < c.d[1]; ++ch)
        for (int64_t h = 0; h < c.d[2]; ++h)
          for (int64_t w = 0; w < c.d[3]; ++w) {
            const int64_t ai = a.at(a.d[0] == 1 ? 0 : n, a.d[1] == 1 ? 0 : ch,
                                    a.d[2] == 1 ? 0 : h, a.d[3] == 1 ? 0 : w);
            const int64_t ci = c.at(n, ch, h, w);
            Acc v = alpha_v * load<Acc>(A, type, ai);
            if (beta_v != Acc(0)) v += beta_v * load<Acc>(C, type, ci);
            store<Acc>(C, type, ci, v);
          }
  };
  loom_emu::enqueue(handle->stream, [run, type, al, be] {
    if (type == CUDNN_DATA_DOUBLE)
      run(al, be);
    else
      run(static_cast<float>(al), static_cast<float>(be));
  });
  return CUDNN_STATUS_SUCCESS;
}

// ---- forward -----------------------------------------------------------------------------------

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void* x,
                                      const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void* workSpace,
                                      size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  using loom_emu::cudnn::Conv;
  return loom_emu::cudnn::launch(
      "cudnnConvolutionForward", Pass::kForward, handle, alpha, beta, xDesc, wDesc, convDesc,
      yDesc, algo, workSpace, workSpaceSizeInBytes, x != nullptr && w != nullptr && y != nullptr,
      [x, w, y](const Conv& c, auto a, auto b) { loom_emu::cudnn::forward(c, a, b, x, w, y); });
}

// ---- backward data -----------------------------------------------------------------------------

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  using loom_emu::cudnn::Conv;
  return loom_emu::cudnn::launch(
      "cudnnConvolutionBackwardData", Pass::kBackwardData, handle, alpha, beta, dxDesc, wDesc,
      convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes,
      w != nullptr && dy != nullptr && dx != nullptr, [w, dy, dx](const Conv& c, auto a, auto b) {
        loom_emu::cudnn::backward_data(c, a, b, w, dy, dx);
      });
}

// ---- backward filter ---------------------------------------------------------------------------

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                             void* workSpace, size_t workSpaceSizeInBytes,
                                             const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  using loom_emu::cudnn::Conv;
  return loom_emu::cudnn::launch(
      "cudnnConvolutionBackwardFilter", Pass::kBackwardFilter, handle, alpha, beta, xDesc, dwDesc,
      convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes,
      x != nullptr && dy != nullptr && dw != nullptr, [x, dy, dw](const Conv& c, auto a, auto b) {
        loom_emu::cudnn::backward_filter(c, a, b, x, dy, dw);
      });
}

// ---- bias gradient -----------------------------------------------------------------------------

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void* alpha,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const void* beta, const cudnnTensorDescriptor_t dbDesc,
                                           void* db) {
  const char* fn = "cudnnConvolutionBackwardBias";
  using namespace loom_emu::cudnn;
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  if (dyDesc == nullptr || dbDesc == nullptr || !dyDesc->set || !dbDesc->set)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor is NULL or unset");
  if (alpha == nullptr || beta == nullptr || dy == nullptr || db == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a data pointer or alpha/beta is NULL");
  if (dyDesc->type != dbDesc->type)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "dy and db have different data types");
  if (!is_computable(dyDesc->type))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "data type " + std::to_string(dyDesc->type));
  const Dims4 y = dyDesc->dims, b = dbDesc->dims;
  if (b.d[0] != 1 || b.d[1] != y.d[1] || b.d[2] != 1 || b.d[3] != 1)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "db is " + dims_text(b) + ", expected (1, " + std::to_string(y.d[1]) + ", 1, 1)");
  const cudnnDataType_t type = dyDesc->type;
  const double al = scalar(alpha, type), be = scalar(beta, type);
  const auto run = [y, b, type, dy, db](auto alpha_v, auto beta_v) {
    using Acc = decltype(alpha_v);
    for (int64_t k = 0; k < y.d[1]; ++k) {
      Acc sum = 0;
      for (int64_t n = 0; n < y.d[0]; ++n)
        for (int64_t h = 0; h < y.d[2]; ++h)
          for (int64_t w = 0; w < y.d[3]; ++w) sum += load<Acc>(dy, type, y.at(n, k, h, w));
      const int64_t bi = b.at(0, k, 0, 0);
      Acc v = alpha_v * sum;
      if (beta_v != Acc(0)) v += beta_v * load<Acc>(db, type, bi);
      store<Acc>(db, type, bi, v);
    }
  };
  loom_emu::enqueue(handle->stream, [run, type, al, be] {
    if (type == CUDNN_DATA_DOUBLE)
      run(al, be);
    else
      run(static_cast<float>(al), static_cast<float>(be));
  });
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
