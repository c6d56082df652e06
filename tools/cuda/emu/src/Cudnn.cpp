// cuDNN on the host, for loom's CUDA emulator: handles, 4-d descriptors,
// algorithm queries and the 2-d convolution passes (see include/cudnn.h for
// what is and is not emulated).
//
// Every call checks its arguments as cuDNN does and, for the calls that
// compute, copies what the descriptors say (callers may destroy them as soon
// as the call returns) and queues the work through loom_emu::enqueue on the
// handle's stream.  A failing call records why; cudnnGetLastErrorString
// returns it, and CUDNN_LOGERR_DBG=1 also prints it to stderr, as cuDNN's own
// logging does.
//
// The passes are direct loops.  Operands are first gathered (through their
// strides, so NCHW, NHWC and any other 4-d layout work) into contiguous
// NCHW / KCRS arrays of the accumulation type (float, or double for double
// data; float32 inputs rounded to TF32 where the math type allows it), each
// output element is accumulated in that type by one host thread in a fixed
// order (deterministic results), and the result is written as alpha * result
// + beta * old (old not read when beta is 0), rounded once to the data type.
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "HostMath.h"
#include "loom_emu/Stream.h"

struct cudnnContext {
  int device = 0;
  cudaStream_t stream = nullptr;
};

namespace loom_emu {
namespace cudnn {

// A 4-d array: dims (n, c, h, w) -- for a filter (k, c/groups, r, s) -- and
// element strides.
struct Dims4 {
  int64_t d[4] = {0, 0, 0, 0};
  int64_t s[4] = {0, 0, 0, 0};
  int64_t count() const { return d[0] * d[1] * d[2] * d[3]; }
  int64_t at(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return a * s[0] + b * s[1] + c * s[2] + e * s[3];
  }
  // One past the largest element offset.
  int64_t span() const {
    int64_t last = 0;
    for (int i = 0; i < 4; ++i) last += (d[i] - 1) * s[i];
    return last + 1;
  }
};

}  // namespace cudnn
}  // namespace loom_emu

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  loom_emu::cudnn::Dims4 dims;
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  loom_emu::cudnn::Dims4 dims;  // (k, c, r, s)
};

struct cudnnConvolutionStruct {
  bool set = false;  // cudnnSetConvolution2dDescriptor called
  int pad[2] = {0, 0};
  int stride[2] = {1, 1};
  int dilation[2] = {1, 1};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace loom_emu {
namespace cudnn {
namespace {

// ---- errors ----------------------------------------------------------------------------------

thread_local std::string t_last_error;

bool log_errors() {
  static const bool on = [] {
    const char* v = std::getenv("CUDNN_LOGERR_DBG");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

// Records why `fn` fails with `status` and returns the status.
cudnnStatus_t fail(cudnnStatus_t status, const char* fn, const std::string& why) {
  t_last_error = std::string(fn) + ": " + cudnnGetErrorString(status) + ": " + why;
  if (log_errors()) std::fprintf(stderr, "cuDNN (emulated) error: %s\n", t_last_error.c_str());
  return status;
}

// ---- handles -----------------------------------------------------------------------------------

struct Handles {
  std::mutex mutex;
  std::unordered_set<const cudnnContext*> live;
};

Handles& handles() {
  static Handles* h = new Handles();  // outlives static destructors (loom never frees handles)
  return *h;
}

bool is_live(const cudnnContext* h) {
  if (h == nullptr) return false;
  std::lock_guard<std::mutex> lock(handles().mutex);
  return handles().live.count(h) != 0;
}

// ---- data types --------------------------------------------------------------------------------

bool is_computable(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_DOUBLE || t == CUDNN_DATA_HALF ||
         t == CUDNN_DATA_BFLOAT16;
}

bool is_known(cudnnDataType_t t) {
  return static_cast<int>(t) >= CUDNN_DATA_FLOAT &&
         static_cast<int>(t) <= CUDNN_DATA_FAST_FLOAT_FOR_FP8;
}

size_t type_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_INT8x4:
    case CUDNN_DATA_UINT8x4: return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8x32: return 32;
    default: return 1;
  }
}

const char* type_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return "CUDNN_DATA_FLOAT";
    case CUDNN_DATA_DOUBLE: return "CUDNN_DATA_DOUBLE";
    case CUDNN_DATA_HALF: return "CUDNN_DATA_HALF";
    case CUDNN_DATA_BFLOAT16: return "CUDNN_DATA_BFLOAT16";
    default: return "a data type the emulator does not compute with";
  }
}

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

std::string dims_text(const Dims4& d) {
  return "(" + std::to_string(d.d[0]) + ", " + std::to_string(d.d[1]) + ", " +
         std::to_string(d.d[2]) + ", " + std::to_string(d.d[3]) + ")";
}

// Reads a scaling factor: double for double data, float otherwise.
double scalar(const void* p, cudnnDataType_t data) {
  return data == CUDNN_DATA_DOUBLE ? *static_cast<const double*>(p)
                                   : static_cast<double>(*static_cast<const float*>(p));
}

// ---- convolution geometry ----------------------------------------------------------------------

enum class Pass { kForward, kBackwardData, kBackwardFilter };

// Everything a convolution pass needs, by value.
struct Conv {
  Dims4 x, w, y;  // w: (K, C/groups, R, S)
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t groups = 1;
  int64_t pad[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  bool flip = false;  // CUDNN_CONVOLUTION: the filter is flipped
  bool tf32 = false;  // float32 operands rounded to TF32
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

bool tf32_applies(cudnnDataType_t type, cudnnMathType_t math) {
  return type == CUDNN_DATA_FLOAT && math != CUDNN_FMA_MATH &&
         !libs::tf32_disabled_by_environment();
}

int64_t out_size(int64_t in, int64_t pad, int64_t kernel, int64_t stride, int64_t dilation) {
  const int64_t extent = (kernel - 1) * dilation + 1;
  const int64_t room = in + 2 * pad - extent;
  return room < 0 ? 0 : room / stride + 1;
}

// Checks (x, w, conv, y) as cuDNN does for every convolution call and fills
// `c`.  For the backward passes y is dy and x is dx, w is dw.
cudnnStatus_t check_conv(const char* fn, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                         const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, Conv* c) {
  if (x == nullptr || w == nullptr || conv == nullptr || y == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor is NULL");
  if (!x->set || !w->set || !conv->set || !y->set)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor was created but never set");
  if (x->type != w->type || x->type != y->type)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                std::string("the tensors' data types differ (x ") + type_name(x->type) +
                    ", w " + type_name(w->type) + ", y " + type_name(y->type) + ")");
  if (!is_computable(x->type))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
                "data type " + std::to_string(x->type) + " is not emulated");
  const bool compute_ok =
      (x->type == CUDNN_DATA_FLOAT && conv->compute == CUDNN_DATA_FLOAT) ||
      (x->type == CUDNN_DATA_DOUBLE && conv->compute == CUDNN_DATA_DOUBLE) ||
      (x->type == CUDNN_DATA_HALF &&
       (conv->compute == CUDNN_DATA_HALF || conv->compute == CUDNN_DATA_FLOAT)) ||
      (x->type == CUDNN_DATA_BFLOAT16 && conv->compute == CUDNN_DATA_FLOAT);
  if (!compute_ok)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
                std::string("compute type ") + type_name(conv->compute) + " with data type " +
                    type_name(x->type) + " is not a supported configuration");
  const int64_t groups = conv->groups;
  const int64_t n = x->dims.d[0], ch = x->dims.d[1], h = x->dims.d[2], wd = x->dims.d[3];
  const int64_t k = w->dims.d[0], cg = w->dims.d[1], r = w->dims.d[2], s = w->dims.d[3];
  if (cg * groups != ch)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the filter's " + std::to_string(cg) + " input channels times " +
                    std::to_string(groups) + " groups do not make the input's " +
                    std::to_string(ch) + " channels");
  if (k % groups != 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                std::to_string(k) + " output channels do not split into " +
                    std::to_string(groups) + " groups");
  const int64_t p = out_size(h, conv->pad[0], r, conv->stride[0], conv->dilation[0]);
  const int64_t q = out_size(wd, conv->pad[1], s, conv->stride[1], conv->dilation[1]);
  if (p <= 0 || q <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the dilated filter " + dims_text(w->dims) + " does not fit the padded input " +
                    dims_text(x->dims));
  if (y->dims.d[0] != n || y->dims.d[1] != k || y->dims.d[2] != p || y->dims.d[3] != q)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the output tensor is " + dims_text(y->dims) + ", the convolution gives (" +
                    std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(p) +
                    ", " + std::to_string(q) + ")");
  const int64_t limit = std::numeric_limits<int32_t>::max();
  if (x->dims.span() > limit || y->dims.span() > limit || w->dims.span() > limit)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "a tensor has 2^31 elements or more");
  c->x = x->dims;
  c->w = w->dims;
  c->y = y->dims;
  c->type = x->type;
  c->groups = groups;
  for (int i = 0; i < 2; ++i) {
    c->pad[i] = conv->pad[i];
    c->stride[i] = conv->stride[i];
    c->dilation[i] = conv->dilation[i];
  }
  c->flip = conv->mode == CUDNN_CONVOLUTION;
  c->math = conv->math;
  c->tf32 = tf32_applies(x->type, conv->math);
  return CUDNN_STATUS_SUCCESS;
}

// ---- algorithms ------------------------------------------------------------------------------

// The emulator offers two algorithms per pass (the same loops run for
// both); the first, ranked first, claims a small workspace -- an "index
// table" of 8 bytes per filter tap of one group -- so callers' workspace
// handling is exercised.
struct Offer {
  int algo;
  bool with_table;
  cudnnDeterminism_t determinism;
};

const std::vector<Offer>& offers(Pass pass) {
  static const std::vector<Offer> forward = {
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, CUDNN_DETERMINISTIC},
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false, CUDNN_DETERMINISTIC}};
  static const std::vector<Offer> data = {
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, CUDNN_DETERMINISTIC},
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, CUDNN_NON_DETERMINISTIC}};
  static const std::vector<Offer> filter = {
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, CUDNN_DETERMINISTIC},
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, CUDNN_NON_DETERMINISTIC}};
  switch (pass) {
    case Pass::kForward: return forward;
    case Pass::kBackwardData: return data;
    case Pass::kBackwardFilter: return filter;
  }
  return forward;
}

int algo_count(Pass pass) {
  switch (pass) {
    case Pass::kForward: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case Pass::kBackwardData: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case Pass::kBackwardFilter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

// Algorithms cuDNN itself documents as non-deterministic.
cudnnDeterminism_t documented_determinism(Pass pass, int algo) {
  if (pass == Pass::kBackwardData && algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
    return CUDNN_NON_DETERMINISTIC;
  if (pass == Pass::kBackwardFilter &&
      (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3))
    return CUDNN_NON_DETERMINISTIC;
  return CUDNN_DETERMINISTIC;
}

size_t workspace_bytes(const Offer& o, const Conv& c) {
  if (!o.with_table) return 0;
  return static_cast<size_t>(8 * c.w.d[1] * c.w.d[2] * c.w.d[3]);
}

// The workspace `algo` needs for this convolution; NOT_SUPPORTED for one the
// emulator does not offer, BAD_PARAM for a value outside the enum.
cudnnStatus_t algo_workspace(const char* fn, Pass pass, int algo, const Conv& c, size_t* bytes) {
  if (algo < 0 || algo >= algo_count(pass))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "algorithm " + std::to_string(algo) + " is not valid");
  for (const Offer& o : offers(pass))
    if (o.algo == algo) {
      *bytes = workspace_bytes(o, c);
      return CUDNN_STATUS_SUCCESS;
    }
  return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
              "algorithm " + std::to_string(algo) + " is not emulated (the emulator offers " +
                  std::to_string(offers(pass)[0].algo) + " and " +
                  std::to_string(offers(pass)[1].algo) + ")");
}

// Multiply-adds of one pass, for the estimated times cudnnFind* reports.
double madds(const Conv& c) {
  return static_cast<double>(c.y.count()) * static_cast<double>(c.w.d[1] * c.w.d[2] * c.w.d[3]);
}

// Fills a perf list: the offers first, then every other algorithm as
// NOT_SUPPORTED.  `timed`: cudnnFind* (estimated times) rather than the
// heuristics (time -1).
template <typename Perf, typename Algo>
cudnnStatus_t rank(const char* fn, Pass pass, const Conv& c, bool timed, int requested,
                   int* returned, Perf* perf) {
  if (requested < 1 || returned == nullptr || perf == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "requestedAlgoCount must be >= 1 and the result pointers non-NULL");
  std::vector<Perf> all;
  const double ms = madds(c) / 1e9;  // about 1 TFLOP/s
  for (size_t i = 0; i < offers(pass).size(); ++i) {
    const Offer& o = offers(pass)[i];
    Perf p{};
    p.algo = static_cast<Algo>(o.algo);
    p.status = CUDNN_STATUS_SUCCESS;
    p.time = timed ? static_cast<float>(ms * (i == 0 ? 0.8 : 1.0)) : -1.0f;
    p.memory = workspace_bytes(o, c);
    p.determinism = o.determinism;
    p.mathType = c.math;
    all.push_back(p);
  }
  for (int a = 0; a < algo_count(pass); ++a) {
    bool offered = false;
    for (const Offer& o : offers(pass)) offered = offered || o.algo == a;
    if (offered) continue;
    Perf p{};
    p.algo = static_cast<Algo>(a);
    p.status = CUDNN_STATUS_NOT_SUPPORTED;
    p.time = -1.0f;
    p.memory = 0;
    p.determinism = documented_determinism(pass, a);
    p.mathType = c.math;
    all.push_back(p);
  }
  const int n = std::min(requested, static_cast<int>(all.size()));
  for (int i = 0; i < n; ++i) perf[i] = all[i];
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
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

// The algorithm and workspace queries of the three passes.
template <typename Perf, typename Algo>
cudnnStatus_t query(const char* fn, Pass pass, bool timed, cudnnHandle_t handle,
                    const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                    const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, int requested,
                    int* returned, Perf* perf) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  Conv c;
  const cudnnStatus_t checked = check_conv(fn, x, w, conv, y, &c);
  if (checked != CUDNN_STATUS_SUCCESS) return checked;
  return rank<Perf, Algo>(fn, pass, c, timed, requested, returned, perf);
}

cudnnStatus_t workspace_query(const char* fn, Pass pass, cudnnHandle_t handle,
                              const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                              const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                              int algo, size_t* bytes) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  if (bytes == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "sizeInBytes is NULL");
  Conv c;
  const cudnnStatus_t checked = check_conv(fn, x, w, conv, y, &c);
  if (checked != CUDNN_STATUS_SUCCESS) return checked;
  return algo_workspace(fn, pass, algo, c, bytes);
}


// ---- descriptors -------------------------------------------------------------------------------

cudnnStatus_t set_dims(const char* fn, Dims4* out, const int d[4], const int64_t s[4]) {
  for (int i = 0; i < 4; ++i) {
    if (d[i] <= 0)
      return fail(CUDNN_STATUS_BAD_PARAM, fn,
                  "dimensions must be positive, got (" + std::to_string(d[0]) + ", " +
                      std::to_string(d[1]) + ", " + std::to_string(d[2]) + ", " +
                      std::to_string(d[3]) + ")");
    if (s[i] <= 0) return fail(CUDNN_STATUS_BAD_PARAM, fn, "strides must be positive");
  }
  for (int i = 0; i < 4; ++i) {
    out->d[i] = d[i];
    out->s[i] = s[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

// Strides of a packed (n, c, h, w) array in `format`.
bool packed_strides(cudnnTensorFormat_t format, const int d[4], int64_t s[4]) {
  const int64_t c = d[1], h = d[2], w = d[3];
  if (format == CUDNN_TENSOR_NCHW) {
    s[0] = c * h * w, s[1] = h * w, s[2] = w, s[3] = 1;
    return true;
  }
  if (format == CUDNN_TENSOR_NHWC) {
    s[0] = h * w * c, s[1] = 1, s[2] = w * c, s[3] = c;
    return true;
  }
  return false;
}

}  // namespace
}  // namespace cudnn
}  // namespace loom_emu

using loom_emu::cudnn::Dims4;
using loom_emu::cudnn::fail;
using loom_emu::cudnn::is_live;
using loom_emu::cudnn::Pass;
using loom_emu::cudnn::query;
using loom_emu::cudnn::workspace_query;

extern "C" {

// ---- the library and its handles ----------------------------------------------------------

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

size_t cudnnGetCudartVersion(void) { return CUDART_VERSION; }

cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetProperty", "value is NULL");
  switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUDNN_MINOR; return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; return CUDNN_STATUS_SUCCESS;
  }
  return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetProperty", "unknown property");
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
      return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH:
      return "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH";
    case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
    case CUDNN_STATUS_LICENSE_ERROR: return "CUDNN_STATUS_LICENSE_ERROR";
    case CUDNN_STATUS_RUNTIME_IN_PROGRESS: return "CUDNN_STATUS_RUNTIME_IN_PROGRESS";
    case CUDNN_STATUS_RUNTIME_FP_OVERFLOW: return "CUDNN_STATUS_RUNTIME_FP_OVERFLOW";
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_INVALID_VALUE: return "CUDNN_STATUS_INVALID_VALUE";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
      return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES:
      return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN:
      return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART";
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
      return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
      return "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING";
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE";
    case CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT:
      return "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT";
    case CUDNN_STATUS_NOT_SUPPORTED_PADDING: return "CUDNN_STATUS_NOT_SUPPORTED_PADDING";
    case CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM:
      return "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API:
      return "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API";
    case CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE:
      return "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM:
      return "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER:
      return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    case CUDNN_STATUS_EXECUTION_FAILED_CUBLAS: return "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDART: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
    case CUDNN_STATUS_EXECUTION_FAILED_CURAND: return "CUDNN_STATUS_EXECUTION_FAILED_CURAND";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (message == nullptr || max_size == 0) return;
  const std::string& text = loom_emu::cudnn::t_last_error;
  const size_t n = std::min(text.size(), max_size - 1);
  std::memcpy(message, text.data(), n);
  message[n] = '\0';
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "handle is NULL");
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate", "no current CUDA device");
  auto* h = new cudnnContext();
  h->device = device;
  {
    auto& all = loom_emu::cudnn::handles();
    std::lock_guard<std::mutex> lock(all.mutex);
    all.live.insert(h);
  }
  *handle = h;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  {
    auto& all = loom_emu::cudnn::handles();
    std::lock_guard<std::mutex> lock(all.mutex);
    if (handle == nullptr || all.live.erase(handle) == 0)
      return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy", "not a live cuDNN handle");
  }
  delete handle;  // queued work holds copies of what it needs, never the handle
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "not a live handle");
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
  if (!is_live(handle) || streamId == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream", "not a live handle, or streamId NULL");
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

// ---- tensors ---------------------------------------------------------------------------------

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  if (tensorDesc == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateTensorDescriptor", "tensorDesc is NULL");
  *tensorDesc = new cudnnTensorStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
  const char* fn = "cudnnSetTensor4dDescriptor";
  if (tensorDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "tensorDesc is NULL");
  if (!loom_emu::cudnn::is_known(dataType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown data type " + std::to_string(dataType));
  const int d[4] = {n, c, h, w};
  int64_t s[4];
  if (!loom_emu::cudnn::packed_strides(format, d, s))
    return fail(format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED
                                                   : CUDNN_STATUS_BAD_PARAM,
                fn, "format " + std::to_string(format) + " is not NCHW or NHWC");
  const cudnnStatus_t st = loom_emu::cudnn::set_dims(fn, &tensorDesc->dims, d, s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  tensorDesc->type = dataType;
  tensorDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc,
                                           cudnnDataType_t dataType, int n, int c, int h, int w,
                                           int nStride, int cStride, int hStride, int wStride) {
  const char* fn = "cudnnSetTensor4dDescriptorEx";
  if (tensorDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "tensorDesc is NULL");
  if (!loom_emu::cudnn::is_known(dataType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown data type " + std::to_string(dataType));
  const int d[4] = {n, c, h, w};
  const int64_t s[4] = {nStride, cStride, hStride, wStride};
  const cudnnStatus_t st = loom_emu::cudnn::set_dims(fn, &tensorDesc->dims, d, s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  tensorDesc->type = dataType;
  tensorDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc,
                                         cudnnDataType_t* dataType, int* n, int* c, int* h,
                                         int* w, int* nStride, int* cStride, int* hStride,
                                         int* wStride) {
  if (tensorDesc == nullptr || !tensorDesc->set || dataType == nullptr || n == nullptr ||
      c == nullptr || h == nullptr || w == nullptr || nStride == nullptr || cStride == nullptr ||
      hStride == nullptr || wStride == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensor4dDescriptor",
                "a NULL pointer or an unset descriptor");
  const Dims4& d = tensorDesc->dims;
  *dataType = tensorDesc->type;
  *n = static_cast<int>(d.d[0]), *c = static_cast<int>(d.d[1]);
  *h = static_cast<int>(d.d[2]), *w = static_cast<int>(d.d[3]);
  *nStride = static_cast<int>(d.s[0]), *cStride = static_cast<int>(d.s[1]);
  *hStride = static_cast<int>(d.s[2]), *wStride = static_cast<int>(d.s[3]);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t tensorDesc, size_t* size) {
  if (tensorDesc == nullptr || !tensorDesc->set || size == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensorSizeInBytes",
                "a NULL pointer or an unset descriptor");
  *size = static_cast<size_t>(tensorDesc->dims.span()) *
          loom_emu::cudnn::type_size(tensorDesc->type);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;  // NULL is allowed
  return CUDNN_STATUS_SUCCESS;
}

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

// ---- filters ---------------------------------------------------------------------------------

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  if (filterDesc == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateFilterDescriptor", "filterDesc is NULL");
  *filterDesc = new cudnnFilterStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  const char* fn = "cudnnSetFilter4dDescriptor";
  if (filterDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "filterDesc is NULL");
  if (!loom_emu::cudnn::is_known(dataType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown data type " + std::to_string(dataType));
  const int d[4] = {k, c, h, w};
  int64_t s[4];
  if (!loom_emu::cudnn::packed_strides(format, d, s))
    return fail(format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED
                                                   : CUDNN_STATUS_BAD_PARAM,
                fn, "format " + std::to_string(format) + " is not NCHW or NHWC");
  const cudnnStatus_t st = loom_emu::cudnn::set_dims(fn, &filterDesc->dims, d, s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  filterDesc->type = dataType;
  filterDesc->format = format;
  filterDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t* dataType, cudnnTensorFormat_t* format,
                                         int* k, int* c, int* h, int* w) {
  if (filterDesc == nullptr || !filterDesc->set || dataType == nullptr || format == nullptr ||
      k == nullptr || c == nullptr || h == nullptr || w == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetFilter4dDescriptor",
                "a NULL pointer or an unset descriptor");
  *dataType = filterDesc->type;
  *format = filterDesc->format;
  *k = static_cast<int>(filterDesc->dims.d[0]), *c = static_cast<int>(filterDesc->dims.d[1]);
  *h = static_cast<int>(filterDesc->dims.d[2]), *w = static_cast<int>(filterDesc->dims.d[3]);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolution descriptors -------------------------------------------------------------

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  if (convDesc == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateConvolutionDescriptor", "convDesc is NULL");
  *convDesc = new cudnnConvolutionStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
  if (convDesc == nullptr || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType",
                "convDesc is NULL or the math type is not valid");
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t* mathType) {
  if (convDesc == nullptr || mathType == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionMathType", "a NULL pointer");
  *mathType = convDesc->math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                            int groupCount) {
  if (convDesc == nullptr || groupCount < 1)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount",
                "convDesc is NULL or groupCount < 1 (" + std::to_string(groupCount) + ")");
  convDesc->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                            int* groupCount) {
  if (convDesc == nullptr || groupCount == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionGroupCount", "a NULL pointer");
  *groupCount = convDesc->groups;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  const char* fn = "cudnnSetConvolution2dDescriptor";
  if (convDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc is NULL");
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "padding must be >= 0 and strides and dilations > 0 (pad " +
                    std::to_string(pad_h) + "x" + std::to_string(pad_w) + ", stride " +
                    std::to_string(u) + "x" + std::to_string(v) + ", dilation " +
                    std::to_string(dilation_h) + "x" + std::to_string(dilation_w) + ")");
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown mode " + std::to_string(mode));
  if (!loom_emu::cudnn::is_known(computeType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown compute type " + std::to_string(computeType));
  convDesc->pad[0] = pad_h, convDesc->pad[1] = pad_w;
  convDesc->stride[0] = u, convDesc->stride[1] = v;
  convDesc->dilation[0] = dilation_h, convDesc->dilation[1] = dilation_w;
  convDesc->mode = mode;
  convDesc->compute = computeType;
  convDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t convDesc,
                                              int* pad_h, int* pad_w, int* u, int* v,
                                              int* dilation_h, int* dilation_w,
                                              cudnnConvolutionMode_t* mode,
                                              cudnnDataType_t* computeType) {
  if (convDesc == nullptr || !convDesc->set || pad_h == nullptr || pad_w == nullptr ||
      u == nullptr || v == nullptr || dilation_h == nullptr || dilation_w == nullptr ||
      mode == nullptr || computeType == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolution2dDescriptor",
                "a NULL pointer or an unset descriptor");
  *pad_h = convDesc->pad[0], *pad_w = convDesc->pad[1];
  *u = convDesc->stride[0], *v = convDesc->stride[1];
  *dilation_h = convDesc->dilation[0], *dilation_w = convDesc->dilation[1];
  *mode = convDesc->mode;
  *computeType = convDesc->compute;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int* n, int* c, int* h, int* w) {
  const char* fn = "cudnnGetConvolution2dForwardOutputDim";
  using namespace loom_emu::cudnn;
  if (convDesc == nullptr || inputTensorDesc == nullptr || filterDesc == nullptr ||
      !convDesc->set || !inputTensorDesc->set || !filterDesc->set || n == nullptr ||
      c == nullptr || h == nullptr || w == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a NULL pointer or an unset descriptor");
  const Dims4& x = inputTensorDesc->dims;
  const Dims4& f = filterDesc->dims;
  if (f.d[1] * convDesc->groups != x.d[1])
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the filter's input channels times the group count differ from the input's");
  const int64_t p = out_size(x.d[2], convDesc->pad[0], f.d[2], convDesc->stride[0],
                             convDesc->dilation[0]);
  const int64_t q = out_size(x.d[3], convDesc->pad[1], f.d[3], convDesc->stride[1],
                             convDesc->dilation[1]);
  if (p <= 0 || q <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "the dilated filter does not fit the padded input");
  *n = static_cast<int>(x.d[0]);
  *c = static_cast<int>(f.d[0]);
  *h = static_cast<int>(p);
  *w = static_cast<int>(q);
  return CUDNN_STATUS_SUCCESS;
}

// ---- forward -----------------------------------------------------------------------------------

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  if (!is_live(handle) || count == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionForwardAlgorithmMaxCount",
                "not a live handle, or count NULL");
  *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}


cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnGetConvolutionForwardAlgorithm_v7", Pass::kForward, false, handle, srcDesc,
      filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnFindConvolutionForwardAlgorithm", Pass::kForward, true, handle, xDesc, wDesc,
      convDesc, yDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return workspace_query("cudnnGetConvolutionForwardWorkspaceSize", Pass::kForward, handle, xDesc,
                         wDesc, convDesc, yDesc, algo, sizeInBytes);
}

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

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  if (!is_live(handle) || count == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionBackwardDataAlgorithmMaxCount",
                "not a live handle, or count NULL");
  *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", Pass::kBackwardData, false, handle, gradDesc,
      filterDesc, convDesc, diffDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnFindConvolutionBackwardDataAlgorithm", Pass::kBackwardData, true, handle, dxDesc,
      wDesc, convDesc, dyDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
    size_t* sizeInBytes) {
  return workspace_query("cudnnGetConvolutionBackwardDataWorkspaceSize", Pass::kBackwardData,
                         handle, dxDesc, wDesc, convDesc, dyDesc, algo, sizeInBytes);
}

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

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle,
                                                                  int* count) {
  if (!is_live(handle) || count == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount",
                "not a live handle, or count NULL");
  *count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", Pass::kBackwardFilter, false, handle,
      srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t dwDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnFindConvolutionBackwardFilterAlgorithm", Pass::kBackwardFilter, true, handle, xDesc,
      dwDesc, convDesc, dyDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t* sizeInBytes) {
  return workspace_query("cudnnGetConvolutionBackwardFilterWorkspaceSize", Pass::kBackwardFilter,
                         handle, xDesc, gradDesc, convDesc, dyDesc, algo, sizeInBytes);
}

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
