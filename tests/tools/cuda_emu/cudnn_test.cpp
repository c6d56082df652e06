// The CUDA emulator's cuDNN (tools/cuda/emu/src/Cudnn*.cpp) on its CUDA
// runtime, against reference loops.
//
// As for GEMM, inputs are multiples of 1/8 in [-2, 2], so float accumulation
// is exact: every result must equal the double-precision reference rounded
// once to the data type, bit for bit.  The convolution cases are loom's
// tests/tensor/cuda_conv_test.cpp shapes (stride, padding, dilation, groups,
// depthwise, kernel = image, 1x1, everything at once); each runs forward,
// backward-data and backward-filter, with the algorithms Get_v7 / Find rank
// first, for every data type (float, double, half, bfloat16), in both modes
// (cross-correlation and convolution), NCHW and NHWC, with alpha/beta (beta 0
// never reads the output, which holds NaN).  Also: the bias add and bias
// gradient, TF32 under each math type, every argument check's status and
// cudnnGetLastErrorString, the workspace a pass claims (written, in bounds),
// and stream order (the work runs on the handle's stream after the call
// returned, with descriptors and alpha/beta as they were at the call).
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/tools/cuda_emu/EmuTestUtil.h"
#include "tools/cuda/emu/src/HostMath.h"

inline void PrintTo(cudnnStatus_t status, std::ostream* os) { *os << cudnnGetErrorString(status); }

namespace {

using emu_test::DeviceBuffer;
using emu_test::Stream;
using emu_test::StreamGate;
using loom_emu::libs::bf16_to_float;
using loom_emu::libs::float_to_bf16;
using loom_emu::libs::float_to_half;
using loom_emu::libs::half_to_float;
using loom_emu::libs::round_to_tf32;

// A 4-d tensor of one cuDNN data type on the host: dims (a, b, c, d) and
// element strides (NCHW or NHWC order of the same logical dims).
struct T4 {
  cudnnDataType_t type;
  int d[4];
  int s[4];
  std::vector<unsigned char> bytes;
  T4(cudnnDataType_t t, const int dims[4], bool nhwc) : type(t) {
    for (int i = 0; i < 4; ++i) d[i] = dims[i];
    if (nhwc) {
      s[1] = 1, s[3] = d[1], s[2] = d[3] * d[1], s[0] = d[2] * d[3] * d[1];
    } else {
      s[3] = 1, s[2] = d[3], s[1] = d[2] * d[3], s[0] = d[1] * d[2] * d[3];
    }
    bytes.resize(static_cast<size_t>(d[0]) * d[1] * d[2] * d[3] * size());
  }
  size_t size() const { return type == CUDNN_DATA_DOUBLE ? 8 : type == CUDNN_DATA_FLOAT ? 4 : 2; }
  size_t at(int a, int b, int c, int e) const {
    return static_cast<size_t>(a) * s[0] + b * s[1] + c * s[2] + e * s[3];
  }
  size_t count() const { return bytes.size() / size(); }
  double get(size_t i) const {
    const unsigned char* p = bytes.data();
    switch (type) {
      case CUDNN_DATA_DOUBLE: return reinterpret_cast<const double*>(p)[i];
      case CUDNN_DATA_FLOAT: return reinterpret_cast<const float*>(p)[i];
      case CUDNN_DATA_HALF: return half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
      default: return bf16_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    }
  }
  void set(size_t i, double v) {
    unsigned char* p = bytes.data();
    switch (type) {
      case CUDNN_DATA_DOUBLE: reinterpret_cast<double*>(p)[i] = v; break;
      case CUDNN_DATA_FLOAT: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
      case CUDNN_DATA_HALF:
        reinterpret_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v));
        break;
      default: reinterpret_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    }
  }
  double get(int a, int b, int c, int e) const { return get(at(a, b, c, e)); }
  // v rounded once into this type (through float for the 16-bit types).
  void put(int a, int b, int c, int e, double v) {
    if (type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16) v = static_cast<float>(v);
    set(at(a, b, c, e), v);
  }
};

void fill(T4& t, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-16, 16);
  for (size_t i = 0; i < t.count(); ++i) t.set(i, d(rng) / 8.0);
}

void fill_nan(T4& t) {
  for (size_t i = 0; i < t.count(); ++i) t.set(i, std::numeric_limits<double>::quiet_NaN());
}

// First element where got and want differ ("" if none).
std::string difference(const T4& got, const T4& want) {
  for (size_t i = 0; i < got.count(); ++i) {
    const double g = got.get(i), e = want.get(i);
    if (!(g == e || (std::isnan(g) && std::isnan(e))))
      return "element " + std::to_string(i) + ": " + std::to_string(g) + " instead of " +
             std::to_string(e);
  }
  return "";
}

struct ConvCase {
  int x[4], w[4];  // x (N, C, H, W), w (K, C/groups, R, S)
  int stride[2], pad[2], dilation[2];
  int groups;
};

const ConvCase kCases[] = {
    {{2, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},    // plain 3x3
    {{3, 4, 11, 9}, {6, 4, 3, 5}, {2, 1}, {1, 2}, {1, 1}, 1},   // stride, uneven padding
    {{2, 4, 13, 13}, {4, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 2},  // dilation, groups
    {{2, 6, 10, 7}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 6},   // depthwise
    {{1, 3, 7, 7}, {5, 3, 7, 7}, {1, 1}, {0, 0}, {1, 1}, 1},    // kernel = image
    {{4, 2, 5, 6}, {3, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},    // 1x1
    {{2, 6, 9, 8}, {9, 2, 2, 3}, {3, 2}, {1, 0}, {2, 1}, 3},    // everything at once
};

int out_dim(int in, int pad, int k, int stride, int dil) {
  return (in + 2 * pad - ((k - 1) * dil + 1)) / stride + 1;
}

// Reference y = alpha * conv(x, w) + beta * y, in double.
void ref_forward(const ConvCase& c, bool flip, const T4& x, const T4& w, T4& y, double alpha,
                 double beta) {
  const int K = w.d[0], Cg = w.d[1], R = w.d[2], S = w.d[3], Kg = K / c.groups;
  for (int n = 0; n < y.d[0]; ++n)
    for (int k = 0; k < K; ++k)
      for (int p = 0; p < y.d[2]; ++p)
        for (int q = 0; q < y.d[3]; ++q) {
          double acc = 0;
          for (int ci = 0; ci < Cg; ++ci)
            for (int r = 0; r < R; ++r)
              for (int s = 0; s < S; ++s) {
                const int h = p * c.stride[0] - c.pad[0] + r * c.dilation[0];
                const int v = q * c.stride[1] - c.pad[1] + s * c.dilation[1];
                if (h < 0 || h >= x.d[2] || v < 0 || v >= x.d[3]) continue;
                acc += x.get(n, (k / Kg) * Cg + ci, h, v) *
                       w.get(k, ci, flip ? R - 1 - r : r, flip ? S - 1 - s : s);
              }
          const double old = beta != 0 ? beta * y.get(n, k, p, q) : 0;
          y.put(n, k, p, q, alpha * acc + old);
        }
}

// Reference dx = alpha * d<dy, conv(x, w)>/dx + beta * dx.
void ref_backward_data(const ConvCase& c, bool flip, T4& dx, const T4& w, const T4& dy,
                       double alpha, double beta) {
  const int K = w.d[0], Cg = w.d[1], R = w.d[2], S = w.d[3], Kg = K / c.groups;
  std::vector<double> acc(dx.count(), 0);
  for (int n = 0; n < dy.d[0]; ++n)
    for (int k = 0; k < K; ++k)
      for (int p = 0; p < dy.d[2]; ++p)
        for (int q = 0; q < dy.d[3]; ++q)
          for (int ci = 0; ci < Cg; ++ci)
            for (int r = 0; r < R; ++r)
              for (int s = 0; s < S; ++s) {
                const int h = p * c.stride[0] - c.pad[0] + r * c.dilation[0];
                const int v = q * c.stride[1] - c.pad[1] + s * c.dilation[1];
                if (h < 0 || h >= dx.d[2] || v < 0 || v >= dx.d[3]) continue;
                acc[dx.at(n, (k / Kg) * Cg + ci, h, v)] +=
                    dy.get(n, k, p, q) * w.get(k, ci, flip ? R - 1 - r : r, flip ? S - 1 - s : s);
              }
  for (int n = 0; n < dx.d[0]; ++n)
    for (int ch = 0; ch < dx.d[1]; ++ch)
      for (int h = 0; h < dx.d[2]; ++h)
        for (int v = 0; v < dx.d[3]; ++v) {
          const double old = beta != 0 ? beta * dx.get(n, ch, h, v) : 0;
          dx.put(n, ch, h, v, alpha * acc[dx.at(n, ch, h, v)] + old);
        }
}

// Reference dw = alpha * d<dy, conv(x, w)>/dw + beta * dw.
void ref_backward_filter(const ConvCase& c, bool flip, const T4& x, T4& dw, const T4& dy,
                         double alpha, double beta) {
  const int K = dw.d[0], Cg = dw.d[1], R = dw.d[2], S = dw.d[3], Kg = K / c.groups;
  std::vector<double> acc(dw.count(), 0);
  for (int n = 0; n < dy.d[0]; ++n)
    for (int k = 0; k < K; ++k)
      for (int p = 0; p < dy.d[2]; ++p)
        for (int q = 0; q < dy.d[3]; ++q)
          for (int ci = 0; ci < Cg; ++ci)
            for (int r = 0; r < R; ++r)
              for (int s = 0; s < S; ++s) {
                const int h = p * c.stride[0] - c.pad[0] + r * c.dilation[0];
                const int v = q * c.stride[1] - c.pad[1] + s * c.dilation[1];
                if (h < 0 || h >= x.d[2] || v < 0 || v >= x.d[3]) continue;
                acc[dw.at(k, ci, flip ? R - 1 - r : r, flip ? S - 1 - s : s)] +=
                    dy.get(n, k, p, q) * x.get(n, (k / Kg) * Cg + ci, h, v);
              }
  for (int k = 0; k < K; ++k)
    for (int ci = 0; ci < Cg; ++ci)
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) {
          const double old = beta != 0 ? beta * dw.get(k, ci, r, s) : 0;
          dw.put(k, ci, r, s, alpha * acc[dw.at(k, ci, r, s)] + old);
        }
}

// The descriptors of one case (destroyed at scope exit).
struct Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descs() {
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateTensorDescriptor(&x));
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateTensorDescriptor(&y));
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateFilterDescriptor(&w));
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateConvolutionDescriptor(&conv));
  }
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
  ~Descs() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
};

cudnnStatus_t set_tensor(cudnnTensorDescriptor_t d, const T4& t) {
  return cudnnSetTensor4dDescriptorEx(d, t.type, t.d[0], t.d[1], t.d[2], t.d[3], t.s[0], t.s[1],
                                      t.s[2], t.s[3]);
}

const char* type_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return "float";
    case CUDNN_DATA_DOUBLE: return "double";
    case CUDNN_DATA_HALF: return "half";
    case CUDNN_DATA_BFLOAT16: return "bfloat16";
    default: return "?";
  }
}

class CudnnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreate(&handle_));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnSetStream(handle_, stream_));
  }
  void TearDown() override {
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }
  void sync() { ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_)); }

  // Runs the three passes of one case on device memory and compares each
  // with its reference.
  void conv_case(const ConvCase& c, cudnnDataType_t type, bool flip, bool nhwc, double alpha,
                 double beta, bool find, std::mt19937& rng) {
    SCOPED_TRACE("conv x(" + std::to_string(c.x[0]) + "," + std::to_string(c.x[1]) + "," +
                 std::to_string(c.x[2]) + "," + std::to_string(c.x[3]) + ") w(" +
                 std::to_string(c.w[0]) + "," + std::to_string(c.w[1]) + "," +
                 std::to_string(c.w[2]) + "," + std::to_string(c.w[3]) + ") " + type_name(type) +
                 (flip ? " CONVOLUTION" : " CROSS_CORRELATION") + (nhwc ? " NHWC" : " NCHW") +
                 " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta));
    const int y_dims[4] = {c.x[0], c.w[0],
                           out_dim(c.x[2], c.pad[0], c.w[2], c.stride[0], c.dilation[0]),
                           out_dim(c.x[3], c.pad[1], c.w[3], c.stride[1], c.dilation[1])};
    T4 x(type, c.x, nhwc), w(type, c.w, nhwc), y(type, y_dims, nhwc);
    fill(x, rng);
    fill(w, rng);
    Descs d;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, set_tensor(d.x, x));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, set_tensor(d.y, y));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetFilter4dDescriptor(d.w, type, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         c.w[0], c.w[1], c.w[2], c.w[3]));
    const cudnnDataType_t compute = type == CUDNN_DATA_DOUBLE ? type : CUDNN_DATA_FLOAT;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetConvolution2dDescriptor(
                  d.conv, c.pad[0], c.pad[1], c.stride[0], c.stride[1], c.dilation[0],
                  c.dilation[1], flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, compute));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnSetConvolutionGroupCount(d.conv, c.groups));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH));
    int dims[4] = {0, 0, 0, 0};
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolution2dForwardOutputDim(
                                        d.conv, d.x, d.w, &dims[0], &dims[1], &dims[2], &dims[3]));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y_dims[i], dims[i]) << "output dim " << i;
    const double d_alpha = alpha, d_beta = beta;
    const float f_alpha = static_cast<float>(alpha), f_beta = static_cast<float>(beta);
    const bool dbl = type == CUDNN_DATA_DOUBLE;
    const void* pa = dbl ? static_cast<const void*>(&d_alpha) : &f_alpha;
    const void* pb = dbl ? static_cast<const void*>(&d_beta) : &f_beta;
    DeviceBuffer<unsigned char> ws(1 << 16);
    DeviceBuffer<unsigned char> dev_x(x.bytes), dev_w(w.bytes);

    // Forward, with the first algorithm Get_v7 or Find ranks.
    cudnnConvolutionFwdAlgoPerf_t fperf[8];
    int count = 0;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, find ? cudnnFindConvolutionForwardAlgorithm(
                                               handle_, d.x, d.w, d.conv, d.y, 8, &count, fperf)
                                         : cudnnGetConvolutionForwardAlgorithm_v7(
                                               handle_, d.x, d.w, d.conv, d.y, 8, &count, fperf));
    ASSERT_EQ(8, count);
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, fperf[0].status);
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, fperf[1].status);
    EXPECT_NE(CUDNN_STATUS_SUCCESS, fperf[2].status);
    EXPECT_EQ(CUDNN_FMA_MATH, fperf[0].mathType);
    size_t bytes = 1;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolutionForwardWorkspaceSize(
                                        handle_, d.x, d.w, d.conv, d.y, fperf[0].algo, &bytes));
    EXPECT_EQ(fperf[0].memory, bytes);
    ASSERT_GT(bytes, 0u);
    ASSERT_LE(bytes, ws.size());
    if (beta == 0)
      fill_nan(y);
    else
      fill(y, rng);
    T4 y_ref = y;
    ref_forward(c, flip, x, w, y_ref, alpha, beta);
    DeviceBuffer<unsigned char> dev_y(y.bytes);
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnConvolutionForward(handle_, pa, d.x, dev_x.get(), d.w, dev_w.get(), d.conv,
                                      fperf[0].algo, ws.get(), bytes, pb, d.y, dev_y.get()));
    sync();
    y.bytes = dev_y.download();
    EXPECT_EQ("", difference(y, y_ref)) << "forward";

    // Backward data, with the second algorithm.
    cudnnConvolutionBwdDataAlgoPerf_t dperf[8];
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                        handle_, d.w, d.y, d.conv, d.x, 8, &count, dperf));
    ASSERT_EQ(6, count);
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, dperf[0].status);
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, dperf[1].status);
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolutionBackwardDataWorkspaceSize(
                                        handle_, d.w, d.y, d.conv, d.x, dperf[1].algo, &bytes));
    T4 dy = y;
    fill(dy, rng);
    T4 dx = x;
    if (beta == 0)
      fill_nan(dx);
    else
      fill(dx, rng);
    T4 dx_ref = dx;
    ref_backward_data(c, flip, dx_ref, w, dy, alpha, beta);
    DeviceBuffer<unsigned char> dev_dy(dy.bytes), dev_dx(dx.bytes);
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnConvolutionBackwardData(handle_, pa, d.w, dev_w.get(), d.y, dev_dy.get(), d.conv,
                                           dperf[1].algo, bytes ? ws.get() : nullptr, bytes, pb,
                                           d.x, dev_dx.get()));
    sync();
    dx.bytes = dev_dx.download();
    EXPECT_EQ("", difference(dx, dx_ref)) << "backward data";

    // Backward filter.
    cudnnConvolutionBwdFilterAlgoPerf_t wperf[8];
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnFindConvolutionBackwardFilterAlgorithm(
                                        handle_, d.x, d.y, d.conv, d.w, 8, &count, wperf));
    ASSERT_EQ(7, count);
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, wperf[0].status);
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                        handle_, d.x, d.y, d.conv, d.w, wperf[0].algo, &bytes));
    ASSERT_LE(bytes, ws.size());
    T4 dw = w;
    if (beta == 0)
      fill_nan(dw);
    else
      fill(dw, rng);
    T4 dw_ref = dw;
    ref_backward_filter(c, flip, x, dw_ref, dy, alpha, beta);
    DeviceBuffer<unsigned char> dev_dw(dw.bytes);
    ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnConvolutionBackwardFilter(
                                        handle_, pa, d.x, dev_x.get(), d.y, dev_dy.get(), d.conv,
                                        wperf[0].algo, ws.get(), bytes, pb, d.w, dev_dw.get()));
    sync();
    dw.bytes = dev_dw.download();
    EXPECT_EQ("", difference(dw, dw_ref)) << "backward filter";
  }

  Stream stream_;
  cudnnHandle_t handle_ = nullptr;
};

class CudnnTypesTest : public CudnnTest, public ::testing::WithParamInterface<cudnnDataType_t> {};

TEST_P(CudnnTypesTest, EveryPassOfEveryCaseMatchesTheReferenceBitForBit) {
  std::mt19937 rng(5);
  int i = 0;
  for (const ConvCase& c : kCases) {
    ++i;
    conv_case(c, GetParam(), false, false, 1, 0, i % 2 == 0, rng);
    if (HasFatalFailure()) return;
    conv_case(c, GetParam(), i % 3 == 0, i % 2 == 1, 2, 0.5, i % 2 == 1, rng);
    if (HasFatalFailure()) return;
    conv_case(c, GetParam(), true, i % 2 == 0, -1, 1, false, rng);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(DataTypes, CudnnTypesTest,
                         ::testing::Values(CUDNN_DATA_FLOAT, CUDNN_DATA_DOUBLE, CUDNN_DATA_HALF,
                                           CUDNN_DATA_BFLOAT16),
                         [](const ::testing::TestParamInfo<cudnnDataType_t>& info) {
                           return std::string(type_name(info.param));
                         });

TEST_F(CudnnTest, ALargerCaseSpreadOverHostThreadsIsExact) {
  std::mt19937 rng(6);
  const ConvCase big = {{4, 16, 24, 24}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1};
  conv_case(big, CUDNN_DATA_FLOAT, false, false, 1, 0, false, rng);
}

class CudnnBiasTest : public CudnnTest, public ::testing::WithParamInterface<cudnnDataType_t> {};

TEST_P(CudnnBiasTest, AddTensorBroadcastsTheBiasAndBackwardBiasSumsIt) {
  const cudnnDataType_t type = GetParam();
  std::mt19937 rng(9);
  const int yd[4] = {3, 5, 4, 6}, bd[4] = {1, 5, 1, 1};
  T4 y(type, yd, false), b(type, bd, false);
  fill(y, rng);
  fill(b, rng);
  cudnnTensorDescriptor_t yt = nullptr, bt = nullptr;
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateTensorDescriptor(&yt));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateTensorDescriptor(&bt));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetTensor4dDescriptor(yt, CUDNN_TENSOR_NCHW, type, 3, 5, 4, 6));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetTensor4dDescriptor(bt, CUDNN_TENSOR_NCHW, type, 1, 5, 1, 1));
  const double d0 = 0, d1 = 1, d2 = 2;
  const float f0 = 0, f1 = 1, f2 = 2;
  const bool dbl = type == CUDNN_DATA_DOUBLE;
  const void* zero = dbl ? static_cast<const void*>(&d0) : &f0;
  const void* one = dbl ? static_cast<const void*>(&d1) : &f1;
  const void* two = dbl ? static_cast<const void*>(&d2) : &f2;

  // y = 2 * b (broadcast) + 1 * y.
  T4 want = y;
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 5; ++c)
      for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 6; ++q) want.put(n, c, p, q, 2 * b.get(0, c, 0, 0) + y.get(n, c, p, q));
  DeviceBuffer<unsigned char> dev_y(y.bytes), dev_b(b.bytes);
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnAddTensor(handle_, two, bt, dev_b.get(), one, yt, dev_y.get()));
  sync();
  y.bytes = dev_y.download();
  EXPECT_EQ("", difference(y, want)) << "cudnnAddTensor";

  // db = 2 * (the sum of dy over n, h, w), beta 0 over NaN.
  fill_nan(b);
  dev_b.upload(b.bytes);
  T4 db_want = b;
  for (int c = 0; c < 5; ++c) {
    double s = 0;
    for (int n = 0; n < 3; ++n)
      for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 6; ++q) s += y.get(n, c, p, q);
    db_want.put(0, c, 0, 0, 2 * s);
  }
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnConvolutionBackwardBias(handle_, two, yt, dev_y.get(), zero, bt, dev_b.get()));
  sync();
  b.bytes = dev_b.download();
  EXPECT_EQ("", difference(b, db_want)) << "cudnnConvolutionBackwardBias";

  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnConvolutionBackwardBias(handle_, two, yt, dev_y.get(), one, yt, dev_y.get()))
      << "a bias gradient into a tensor that is not a bias";
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetTensor4dDescriptor(bt, CUDNN_TENSOR_NCHW, type, 1, 4, 1, 1));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnAddTensor(handle_, one, bt, dev_b.get(), one, yt, dev_y.get()))
      << "a bias that does not broadcast";
  cudnnDestroyTensorDescriptor(yt);
  cudnnDestroyTensorDescriptor(bt);
}

INSTANTIATE_TEST_SUITE_P(DataTypes, CudnnBiasTest,
                         ::testing::Values(CUDNN_DATA_FLOAT, CUDNN_DATA_DOUBLE, CUDNN_DATA_HALF,
                                           CUDNN_DATA_BFLOAT16),
                         [](const ::testing::TestParamInfo<cudnnDataType_t>& info) {
                           return std::string(type_name(info.param));
                         });

// float32 data under TENSOR_OP_MATH or DEFAULT_MATH is rounded to TF32 (as on
// an Ampere or later GPU); FMA_MATH keeps float32.
TEST_F(CudnnTest, Tf32RoundsFloatOperandsUnlessTheMathTypeIsFma) {
  const int xd[4] = {1, 4, 6, 6}, wd[4] = {2, 4, 3, 3}, yd[4] = {1, 2, 4, 4};
  T4 x(CUDNN_DATA_FLOAT, xd, false), w(CUDNN_DATA_FLOAT, wd, false), y(CUDNN_DATA_FLOAT, yd, false);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (size_t i = 0; i < x.count(); ++i) x.set(i, dist(rng));
  for (size_t i = 0; i < w.count(); ++i) w.set(i, dist(rng));
  T4 xr = x, wr = w;
  for (size_t i = 0; i < x.count(); ++i) xr.set(i, round_to_tf32(static_cast<float>(x.get(i))));
  for (size_t i = 0; i < w.count(); ++i) wr.set(i, round_to_tf32(static_cast<float>(w.get(i))));
  const ConvCase c = {{1, 4, 6, 6}, {2, 4, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1};
  T4 exact = y, rounded = y;
  ref_forward(c, false, x, w, exact, 1, 0);
  ref_forward(c, false, xr, wr, rounded, 1, 0);
  Descs d;
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, set_tensor(d.x, x));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, set_tensor(d.y, y));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 2, 4, 3, 3));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetConvolution2dDescriptor(d.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
  DeviceBuffer<unsigned char> dev_x(x.bytes), dev_w(w.bytes), dev_y(y.bytes);
  const float one = 1, zero = 0;
  // The largest differences from the exact and the TF32-rounded references.
  const auto run = [&](cudnnMathType_t math) {
    EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnSetConvolutionMathType(d.conv, math));
    EXPECT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnConvolutionForward(handle_, &one, d.x, dev_x.get(), d.w, dev_w.get(), d.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                                      d.y, dev_y.get()));
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
    y.bytes = dev_y.download();
    double worst_exact = 0, worst_rounded = 0;
    for (size_t i = 0; i < y.count(); ++i) {
      worst_exact = std::max(worst_exact, std::fabs(y.get(i) - exact.get(i)));
      worst_rounded = std::max(worst_rounded, std::fabs(y.get(i) - rounded.get(i)));
    }
    return std::make_pair(worst_exact, worst_rounded);
  };
  EXPECT_LT(run(CUDNN_FMA_MATH).first, 1e-5) << "FMA_MATH is float32";
  const auto tensor = run(CUDNN_TENSOR_OP_MATH);
  EXPECT_LT(tensor.second, 1e-5) << "TENSOR_OP_MATH rounds to TF32";
  EXPECT_GT(tensor.first, 1e-5) << "TENSOR_OP_MATH rounds to TF32";
  EXPECT_LT(run(CUDNN_DEFAULT_MATH).second, 1e-5) << "DEFAULT_MATH allows TF32";
}

TEST_F(CudnnTest, VersionsAndErrorStrings) {
  EXPECT_EQ(90000u, cudnnGetVersion());
  int v = -1;
  EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetProperty(MAJOR_VERSION, &v));
  EXPECT_EQ(9, v);
  EXPECT_STREQ("CUDNN_STATUS_BAD_PARAM", cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM));
  EXPECT_STREQ("CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
               cudnnGetErrorString(CUDNN_STATUS_ALLOC_FAILED));
  cudaStream_t got = nullptr;
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetStream(handle_, &got));
  EXPECT_EQ(stream_.get(), got);
}

TEST_F(CudnnTest, DescriptorArgumentChecks) {
  Descs d;
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 0, 5))
      << "a zero dimension";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnSetTensor4dDescriptor(d.x, static_cast<cudnnTensorFormat_t>(3), CUDNN_DATA_FLOAT,
                                       2, 3, 5, 5))
      << "a format that does not exist";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnSetConvolution2dDescriptor(d.conv, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT))
      << "negative padding";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnSetConvolution2dDescriptor(d.conv, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT))
      << "zero stride";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolutionGroupCount(d.conv, 0)) << "zero groups";
}

// A 2x3x5x5 input, a 4x3x3x3 filter of ones, a 2x4x3x3 output.
class CudnnForwardTest : public CudnnTest {
 protected:
  void SetUp() override {
    CudnnTest::SetUp();
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetTensor4dDescriptor(d_.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 5, 5));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetFilter4dDescriptor(d_.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetTensor4dDescriptor(d_.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 3, 3));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetConvolution2dDescriptor(d_.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  }
  cudnnStatus_t forward(int algo, void* workspace, size_t bytes, const float* alpha = &one_) {
    return cudnnConvolutionForward(handle_, alpha, d_.x, x_.get(), d_.w, w_.get(), d_.conv,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), workspace, bytes,
                                   &zero_, d_.y, y_.get());
  }
  std::string last_error() {
    char message[512];
    cudnnGetLastErrorString(message, sizeof message);
    return message;
  }

  static constexpr float one_ = 1, zero_ = 0;
  Descs d_;
  DeviceBuffer<float> x_{std::vector<float>(2 * 3 * 25, 1)};
  DeviceBuffer<float> w_{std::vector<float>(4 * 3 * 9, 1)};
  DeviceBuffer<float> y_{std::vector<float>(2 * 4 * 9, 0)};
};

TEST_F(CudnnForwardTest, WorkspaceAndAlgorithmChecks) {
  size_t need = 0;
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolutionForwardWorkspaceSize(
                                      handle_, d_.x, d_.w, d_.conv, d_.y,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need));
  EXPECT_EQ(8u * 3 * 9, need);
  DeviceBuffer<unsigned char> ws(std::vector<unsigned char>(4096, 0));
  EXPECT_EQ(CUDNN_STATUS_NOT_SUPPORTED,
            forward(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws.get(), need - 1))
      << "too small a workspace";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 16))
      << "a NULL workspace with a size";
  EXPECT_EQ(CUDNN_STATUS_NOT_SUPPORTED, forward(CUDNN_CONVOLUTION_FWD_ALGO_FFT, ws.get(), 4096))
      << "an algorithm the emulator does not offer";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(9, ws.get(), 4096))
      << "an algorithm that does not exist";
  size_t bytes = 0;
  EXPECT_EQ(CUDNN_STATUS_NOT_SUPPORTED,
            cudnnGetConvolutionForwardWorkspaceSize(handle_, d_.x, d_.w, d_.conv, d_.y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, &bytes));
  EXPECT_NE(std::string::npos, last_error().find("not emulated")) << last_error();

  // The queued work writes the workspace it claimed, and nothing past it.
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            forward(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws.get(), 4096));
  sync();
  const std::vector<unsigned char> written = ws.download();
  EXPECT_EQ(0x5A, written[0]);
  EXPECT_EQ(0x5A, written[need - 1]);
  EXPECT_EQ(0, written[need]);
  EXPECT_EQ(27.0f, y_.download()[0]);

  cudnnConvolutionFwdAlgoPerf_t perf[2];
  int count = 0;
  EXPECT_EQ(CUDNN_STATUS_SUCCESS, cudnnGetConvolutionForwardAlgorithm_v7(
                                      handle_, d_.x, d_.w, d_.conv, d_.y, 2, &count, perf));
  EXPECT_EQ(2, count) << "requestedAlgoCount limits the list";
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, cudnnGetConvolutionForwardAlgorithm_v7(
                                        handle_, d_.x, d_.w, d_.conv, d_.y, 0, &count, perf));
}

TEST_F(CudnnForwardTest, ShapeAndTypeChecks) {
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetTensor4dDescriptor(d_.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 4, 4));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(0, nullptr, 0)) << "output dims that do not match";
  EXPECT_NE(std::string::npos, last_error().find("(2, 4, 3, 3)"))
      << "the message names the expected dims: " << last_error();
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetTensor4dDescriptor(d_.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 3, 3));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetFilter4dDescriptor(d_.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 2, 3, 3));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(0, nullptr, 0))
      << "filter channels x groups != input channels";
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnSetConvolutionGroupCount(d_.conv, 3));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetFilter4dDescriptor(d_.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 1, 3, 3));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(0, nullptr, 0))
      << "output channels not divisible by the groups";
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnSetConvolutionGroupCount(d_.conv, 1));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetFilter4dDescriptor(d_.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 7, 7));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(0, nullptr, 0)) << "a kernel larger than the input";
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetFilter4dDescriptor(d_.w, CUDNN_DATA_DOUBLE, CUDNN_TENSOR_NCHW, 4, 3, 3, 3));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(0, nullptr, 0)) << "mixed data types";
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetFilter4dDescriptor(d_.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3));
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetConvolution2dDescriptor(d_.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_HALF));
  EXPECT_EQ(CUDNN_STATUS_NOT_SUPPORTED, forward(0, nullptr, 0)) << "float data, half compute";
  ASSERT_EQ(CUDNN_STATUS_SUCCESS,
            cudnnSetConvolution2dDescriptor(d_.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, forward(0, nullptr, 0, nullptr)) << "alpha NULL";
  cudnnTensorDescriptor_t unset = nullptr;
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnCreateTensorDescriptor(&unset));
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM,
            cudnnConvolutionForward(handle_, &one_, unset, x_.get(), d_.w, w_.get(), d_.conv,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero_,
                                    d_.y, y_.get()))
      << "a descriptor never set";
  cudnnDestroyTensorDescriptor(unset);
  sync();
  EXPECT_EQ(std::vector<float>(2 * 4 * 9, 0), y_.download()) << "a refused call wrote y";
}

// The work runs on the handle's stream after the call returned, with the
// descriptors and alpha as they were at the call (they may be destroyed or
// changed as soon as it returns).
TEST_F(CudnnForwardTest, WorkRunsInStreamOrderWithWhatTheCallSaw) {
  {
    StreamGate gate(stream_);
    Descs e;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetTensor4dDescriptor(e.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 5, 5));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetFilter4dDescriptor(e.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 3, 3));
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetConvolution2dDescriptor(e.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    float two = 2;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnConvolutionForward(handle_, &two, e.x, x_.get(), e.w, w_.get(), e.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero_,
                                      e.y, y_.get()));
    two = 100;
    ASSERT_EQ(CUDNN_STATUS_SUCCESS,
              cudnnSetTensor4dDescriptor(e.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 1, 1, 1, 1));
    EXPECT_EQ(0.0f, y_.download()[0]) << "computed before the stream got to it";
  }  // the descriptors are destroyed here, the gate opened
  sync();
  EXPECT_EQ(std::vector<float>(2 * 4 * 9, 54), y_.download());
}

TEST_F(CudnnTest, ADestroyedHandleIsRefused) {
  ASSERT_EQ(CUDNN_STATUS_SUCCESS, cudnnDestroy(handle_));
  cudnnHandle_t gone = handle_;
  handle_ = nullptr;
  EXPECT_EQ(CUDNN_STATUS_BAD_PARAM, cudnnSetStream(gone, stream_));
}

}  // namespace
