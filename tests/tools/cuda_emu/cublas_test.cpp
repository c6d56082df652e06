// The CUDA emulator's cuBLAS (tools/cuda/emu/src/Cublas.cpp) on its CUDA
// runtime, against reference loops.
//
// Inputs are multiples of 1/8 in [-2, 2] (integers for int8), so every
// product and partial sum is exact in float: the result must equal the
// double-precision reference rounded once to the output type, bit for bit,
// which also checks the float16 / bfloat16 rounding of the output.  Covered:
// every supported (A/B type, C type, compute type) combination x every pair
// of ops (N, T, C) x shapes from 1x1x1 to 64x33x65 (k = 0 included) x padded
// leading dimensions, batches with strides (0 included), alpha/beta (beta 0
// never reads C, which holds NaN); TF32 under the compute types and math
// modes that allow it; every argument check's status; and stream order
// (the product runs on the handle's stream after the call returned, with
// host-mode alpha/beta read at the call and device-mode ones when it runs,
// and is recorded, not run, while the stream is captured into a graph).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/tools/cuda_emu/EmuTestUtil.h"
#include "tools/cuda/emu/src/HostMath.h"

inline void PrintTo(cublasStatus_t status, std::ostream* os) { *os << cublasGetStatusName(status); }

namespace {

using emu_test::DeviceBuffer;
using emu_test::Stream;
using emu_test::StreamGate;
using loom_emu::libs::bf16_to_float;
using loom_emu::libs::float_to_bf16;
using loom_emu::libs::float_to_half;
using loom_emu::libs::half_to_float;
using loom_emu::libs::round_to_tf32;

// A matrix buffer of one cudaDataType on the host, as that type's bit patterns.
struct Buffer {
  cudaDataType type;
  std::vector<unsigned char> bytes;
  Buffer(cudaDataType t, size_t n) : type(t), bytes(n * size(t)) {}
  static size_t size(cudaDataType t) {
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : t == CUDA_R_8I ? 1 : 2;
  }
  size_t count() const { return bytes.size() / size(type); }
  double get(size_t i) const {
    const unsigned char* p = bytes.data();
    switch (type) {
      case CUDA_R_64F: return reinterpret_cast<const double*>(p)[i];
      case CUDA_R_32F: return reinterpret_cast<const float*>(p)[i];
      case CUDA_R_16F: return half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
      case CUDA_R_16BF: return bf16_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
      case CUDA_R_8I: return reinterpret_cast<const int8_t*>(p)[i];
      default: return 0;
    }
  }
  void set(size_t i, double v) {
    unsigned char* p = bytes.data();
    switch (type) {
      case CUDA_R_64F: reinterpret_cast<double*>(p)[i] = v; break;
      case CUDA_R_32F: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
      case CUDA_R_16F:
        reinterpret_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v));
        break;
      case CUDA_R_16BF:
        reinterpret_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v));
        break;
      case CUDA_R_8I: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
      default: break;
    }
  }
  // What v becomes when the GEMM stores it: float accumulation for the
  // 16-bit types, then one rounding.
  double stored(double v) const {
    Buffer one(type, 1);
    if (type == CUDA_R_16F || type == CUDA_R_16BF) v = static_cast<float>(v);
    one.set(0, v);
    return one.get(0);
  }
};

void fill(Buffer& b, std::mt19937& rng, bool integers = false) {
  std::uniform_int_distribution<int> d(-16, 16);
  for (size_t i = 0; i < b.count(); ++i) b.set(i, integers ? d(rng) : d(rng) / 8.0);
}

void fill_nan(Buffer& b) {
  for (size_t i = 0; i < b.count(); ++i) b.set(i, std::numeric_limits<double>::quiet_NaN());
}

struct Case {
  cublasOperation_t ta, tb;
  int m, n, k;
  int lda_pad, ldb_pad, ldc_pad;
  int batch;
  long long sa_extra, sb_extra, sc_extra;  // extra batch stride; -1: stride 0 (broadcast)
  double alpha, beta;
};

std::string describe(const Case& c) {
  return "gemm " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         " ops " + std::to_string(c.ta) + std::to_string(c.tb) + " pads " +
         std::to_string(c.lda_pad) + std::to_string(c.ldb_pad) + std::to_string(c.ldc_pad) +
         " batch " + std::to_string(c.batch) + " alpha " + std::to_string(c.alpha) + " beta " +
         std::to_string(c.beta);
}

// Reference C = alpha op(A) op(B) + beta C over the batch, in double, each
// element rounded once into C's type.
void reference(const Case& c, const Buffer& a, int lda, long long sa, const Buffer& b, int ldb,
               long long sb, Buffer& cbuf, int ldc, long long sc) {
  for (int p = 0; p < c.batch; ++p)
    for (int j = 0; j < c.n; ++j)
      for (int i = 0; i < c.m; ++i) {
        double acc = 0;
        for (int l = 0; l < c.k; ++l) {
          const double av =
              c.ta == CUBLAS_OP_N ? a.get(p * sa + i + l * lda) : a.get(p * sa + l + i * lda);
          const double bv =
              c.tb == CUBLAS_OP_N ? b.get(p * sb + l + j * ldb) : b.get(p * sb + j + l * ldb);
          acc += av * bv;
        }
        const size_t ci = p * sc + i + j * ldc;
        double v = c.alpha * acc;
        if (c.beta != 0) v += c.beta * cbuf.get(ci);
        cbuf.set(ci, cbuf.stored(v));
      }
}

class CublasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasCreate(&handle_));
    ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSetStream(handle_, stream_));
  }
  void TearDown() override {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  void sync() { ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_)); }

  // Runs one case through cublasGemmStridedBatchedEx on device memory and
  // compares every element of C (padding included) with the reference.
  void gemm_case(const Case& c, cudaDataType ab, cudaDataType ct, cublasComputeType_t compute,
                 std::mt19937& rng) {
    const int a_rows = c.ta == CUBLAS_OP_N ? c.m : c.k, a_cols = c.ta == CUBLAS_OP_N ? c.k : c.m;
    const int b_rows = c.tb == CUBLAS_OP_N ? c.k : c.n, b_cols = c.tb == CUBLAS_OP_N ? c.n : c.k;
    const int lda = std::max(1, a_rows) + c.lda_pad, ldb = std::max(1, b_rows) + c.ldb_pad;
    const int ldc = std::max(1, c.m) + c.ldc_pad;
    const long long sa = c.sa_extra < 0 ? 0 : static_cast<long long>(lda) * a_cols + c.sa_extra;
    const long long sb = c.sb_extra < 0 ? 0 : static_cast<long long>(ldb) * b_cols + c.sb_extra;
    const long long sc = static_cast<long long>(ldc) * c.n + c.sc_extra;
    Buffer a(ab, sa * (c.batch - 1) + static_cast<size_t>(lda) * a_cols + 1);
    Buffer b(ab, sb * (c.batch - 1) + static_cast<size_t>(ldb) * b_cols + 1);
    Buffer out(ct, sc * (c.batch - 1) + static_cast<size_t>(ldc) * c.n + 1);
    fill(a, rng, ab == CUDA_R_8I);
    fill(b, rng, ab == CUDA_R_8I);
    if (c.beta == 0)
      fill_nan(out);  // beta 0: C must not be read
    else
      fill(out, rng);
    Buffer expected = out;
    reference(c, a, lda, sa, b, ldb, sb, expected, ldc, sc);
    DeviceBuffer<unsigned char> da(a.bytes), db(b.bytes), dc(out.bytes);
    cublasStatus_t status;
    if (compute == CUBLAS_COMPUTE_64F) {
      const double alpha = c.alpha, beta = c.beta;
      status = cublasGemmStridedBatchedEx(handle_, c.ta, c.tb, c.m, c.n, c.k, &alpha, da.get(), ab,
                                          lda, sa, db.get(), ab, ldb, sb, &beta, dc.get(), ct, ldc,
                                          sc, c.batch, compute, CUBLAS_GEMM_DEFAULT);
    } else {
      const float alpha = static_cast<float>(c.alpha), beta = static_cast<float>(c.beta);
      status = cublasGemmStridedBatchedEx(handle_, c.ta, c.tb, c.m, c.n, c.k, &alpha, da.get(), ab,
                                          lda, sa, db.get(), ab, ldb, sb, &beta, dc.get(), ct, ldc,
                                          sc, c.batch, compute, CUBLAS_GEMM_DEFAULT);
    }
    ASSERT_EQ(CUBLAS_STATUS_SUCCESS, status) << describe(c);
    sync();
    out.bytes = dc.download();
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < out.count(); ++i) {
      const double g = out.get(i), e = expected.get(i);
      if (!(g == e || (std::isnan(g) && std::isnan(e))) && bad++ == 0) first = i;
    }
    EXPECT_EQ(0u, bad) << describe(c) << ": first difference at " << first << ", " << out.get(first)
                       << " instead of " << expected.get(first);
  }

  Stream stream_;
  cublasHandle_t handle_ = nullptr;
};

struct Types {
  cudaDataType ab, c;
  cublasComputeType_t compute;
  const char* name;
};

void PrintTo(const Types& types, std::ostream* os) { *os << types.name; }

class CublasTypesTest : public CublasTest, public ::testing::WithParamInterface<Types> {};

TEST_P(CublasTypesTest, EveryOpPairShapeStrideAndScalarMatchesTheReferenceBitForBit) {
  const Types& t = GetParam();
  std::mt19937 rng(1);
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
  const int shapes[][3] = {{3, 5, 4},    {17, 9, 13}, {1, 7, 1}, {1, 1, 1},
                           {64, 33, 65}, {5, 1, 6},   {4, 3, 0}, {2, 2, 9}};
  const double scalars[][2] = {{1, 0}, {1, 1}, {2, 0.5}, {0, 0.5}, {-1.5, 0}, {0, 0}};
  int which = 0;
  for (cublasOperation_t ta : ops)
    for (cublasOperation_t tb : ops)
      for (const auto& s : shapes) {
        ++which;
        const auto& sc = scalars[which % 6];
        const Case c{ta,
                     tb,
                     s[0],
                     s[1],
                     s[2],
                     which % 3,
                     (which / 3) % 2,
                     which % 2,
                     1 + which % 3,
                     which % 5 == 0 ? -1 : which % 2,
                     which % 7 == 0 ? -1 : 0,
                     which % 2,
                     sc[0],
                     sc[1]};
        gemm_case(c, t.ab, t.c, t.compute, rng);
        if (HasFatalFailure()) return;
      }
}

INSTANTIATE_TEST_SUITE_P(
    Types, CublasTypesTest,
    ::testing::Values(Types{CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "f32"},
                      Types{CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, "f32_pedantic"},
                      Types{CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, "f64"},
                      Types{CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, "f16"},
                      Types{CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16"},
                      Types{CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "f16_into_f32"},
                      Types{CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, "bf16_into_f32"},
                      Types{CUDA_R_8I, CUDA_R_32F, CUBLAS_COMPUTE_32F, "i8_into_f32"}),
    [](const ::testing::TestParamInfo<Types>& info) { return std::string(info.param.name); });

TEST_F(CublasTest, LongInnerDimensionAndAProductSpreadOverThreadsAreExact) {
  std::mt19937 rng(2);
  gemm_case({CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 32768, 0, 0, 0, 1, 0, 0, 0, 1, 0}, CUDA_R_16F,
            CUDA_R_16F, CUBLAS_COMPUTE_32F, rng);
  gemm_case({CUBLAS_OP_N, CUBLAS_OP_T, 200, 150, 300, 1, 2, 3, 2, 5, 0, 1, 1, 1}, CUDA_R_32F,
            CUDA_R_32F, CUBLAS_COMPUTE_32F, rng);
}

TEST_F(CublasTest, SgemmDgemmAndGemmExComputeSmallProducts) {
  // A 2x3 (column-major), B 3x2: C = A B.
  DeviceBuffer<float> a(std::vector<float>{1, 2, 3, 4, 5, 6}),
      b(std::vector<float>{1, 0, 0, 1, 1, 1});
  DeviceBuffer<float> c(std::vector<float>(4, -7)), ec(std::vector<float>(4, 0));
  const float one = 1, zero = 0;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one,
                                               a.get(), 2, b.get(), 3, &zero, c.get(), 2));
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS,
            cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a.get(), CUDA_R_32F, 2,
                         b.get(), CUDA_R_32F, 3, &zero, ec.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT_TENSOR_OP));
  // A^T = [[1,2],[3,4]], B = [[5,7],[6,8]]: A^T B = [[17,23],[39,53]], plus 2 * C.
  DeviceBuffer<double> da(std::vector<double>{1, 2, 3, 4}), db(std::vector<double>{5, 6, 7, 8});
  DeviceBuffer<double> dc(std::vector<double>(4, 1));
  const double d_one = 1, d_two = 2;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasDgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &d_one,
                                               da.get(), 2, db.get(), 2, &d_two, dc.get(), 2));
  sync();
  EXPECT_EQ(std::vector<float>({1, 2, 9, 12}), c.download());
  EXPECT_EQ(std::vector<float>({1, 2, 9, 12}), ec.download());
  EXPECT_EQ(std::vector<double>({19, 41, 25, 55}), dc.download());
}

// TF32: FAST_TF32, or the TF32 math mode with COMPUTE_32F, round the float32
// inputs; PEDANTIC and the default math mode do not.
TEST_F(CublasTest, Tf32RoundsInputsOnlyWhereTheComputeTypeOrMathModeAllowsIt) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int m = 16, n = 12, k = 40;
  std::vector<float> a(m * k), b(k * n);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  const auto product = [&](bool tf32) {
    std::vector<double> c(m * n, 0);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i)
        for (int l = 0; l < k; ++l) {
          const float av = a[i + l * m], bv = b[l + j * k];
          c[i + j * m] +=
              static_cast<double>(tf32 ? round_to_tf32(av) : av) * (tf32 ? round_to_tf32(bv) : bv);
        }
    return c;
  };
  const std::vector<double> exact = product(false), rounded = product(true);
  DeviceBuffer<float> da(a), db(b), dc(m * n);
  const float one = 1, zero = 0;
  const auto run = [&](int mode, cublasComputeType_t compute) {
    EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasSetMathMode(handle_, static_cast<cublasMath_t>(mode)));
    EXPECT_EQ(CUBLAS_STATUS_SUCCESS,
              cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), CUDA_R_32F,
                           m, db.get(), CUDA_R_32F, k, &zero, dc.get(), CUDA_R_32F, m, compute,
                           CUBLAS_GEMM_DEFAULT));
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
    return dc.download();
  };
  const auto close = [&](const std::vector<float>& got, const std::vector<double>& want) {
    for (size_t i = 0; i < got.size(); ++i)
      if (std::fabs(got[i] - want[i]) > 1e-5) return false;
    return true;
  };
  const std::vector<float> plain = run(CUBLAS_DEFAULT_MATH, CUBLAS_COMPUTE_32F);
  EXPECT_TRUE(close(plain, exact)) << "default math is float32";
  const std::vector<float> fast = run(CUBLAS_DEFAULT_MATH, CUBLAS_COMPUTE_32F_FAST_TF32);
  EXPECT_TRUE(close(fast, rounded));
  EXPECT_FALSE(close(fast, exact)) << "the inputs were not rounded to TF32";
  EXPECT_TRUE(close(run(CUBLAS_TF32_TENSOR_OP_MATH, CUBLAS_COMPUTE_32F), rounded));
  EXPECT_TRUE(close(run(CUBLAS_TF32_TENSOR_OP_MATH, CUBLAS_COMPUTE_32F_PEDANTIC), exact))
      << "PEDANTIC never uses TF32";
  EXPECT_TRUE(close(run(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
                        CUBLAS_COMPUTE_32F),
                    exact));
}

TEST_F(CublasTest, HandleStreamModesAndVersions) {
  cudaStream_t got = nullptr;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetStream(handle_, &got));
  EXPECT_EQ(stream_.get(), got);
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, cublasSetMathMode(handle_, static_cast<cublasMath_t>(5)));
  const int tf32_mode =
      CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS,
            cublasSetMathMode(handle_, static_cast<cublasMath_t>(tf32_mode)));
  cublasMath_t mode;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetMathMode(handle_, &mode));
  EXPECT_EQ(19, mode);
  cublasPointerMode_t pm;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetPointerMode(handle_, &pm));
  EXPECT_EQ(CUBLAS_POINTER_MODE_HOST, pm);
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE,
            cublasSetPointerMode(handle_, static_cast<cublasPointerMode_t>(2)));
  int v = -1;
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetProperty(MAJOR_VERSION, &v));
  EXPECT_EQ(13, v);
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetProperty(MINOR_VERSION, &v));
  EXPECT_EQ(0, v);
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetProperty(PATCH_LEVEL, &v));
  EXPECT_EQ(0, v);
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetVersion(handle_, &v));
  EXPECT_EQ(CUBLAS_VERSION, v);
  EXPECT_STREQ("CUBLAS_STATUS_NOT_INITIALIZED", cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED));
  EXPECT_NE(std::string::npos,
            std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)).find("invalid"));
  DeviceBuffer<unsigned char> workspace(1024);
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, cublasSetWorkspace(handle_, workspace.get(), 1024));
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, cublasSetWorkspace(handle_, nullptr, 1024));
}

TEST_F(CublasTest, ArgumentChecksReturnCublasStatuses) {
  DeviceBuffer<float> a(64), b(64), c(std::vector<float>(64, 3));
  const float one = 1, zero = 0;
  const auto ex = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda,
                      int ldb, int ldc, int batch = 1, cudaDataType at = CUDA_R_32F,
                      cudaDataType ct = CUDA_R_32F,
                      cublasComputeType_t compute = CUBLAS_COMPUTE_32F) {
    return cublasGemmStridedBatchedEx(handle_, ta, tb, m, n, k, &one, a.get(), at, lda, 0, b.get(),
                                      at, ldb, 0, &zero, c.get(), ct, ldc, 0, batch, compute,
                                      CUBLAS_GEMM_DEFAULT);
  };
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, -1, 2, 2, 2, 2, 2)) << "m < 0";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 2, -1, 2, 2, 2, 2)) << "n < 0";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 2, 2, -1, 2, 2, 2)) << "k < 0";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 3, 2, 2, 2, 2, 3)) << "lda < m for op N";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(T, N, 3, 2, 4, 3, 4, 3)) << "lda < k for op T";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 2, 3, 4, 2, 3, 2)) << "ldb < k for op N";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, T, 2, 3, 4, 2, 2, 2)) << "ldb < n for op T";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 3, 2, 2, 3, 2, 2)) << "ldc < m";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 0, 0, 0, 0, 1, 1)) << "lda < 1, even when empty";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(N, N, 2, 2, 2, 2, 2, 2, -1)) << "batch < 0";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, ex(CUBLAS_OP_CONJG, N, 2, 2, 2, 2, 2, 2)) << "op CONJG";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE,
            cublasGemmStridedBatchedEx(handle_, N, N, 2, 2, 2, nullptr, a.get(), CUDA_R_32F, 2, 0,
                                       b.get(), CUDA_R_32F, 2, 0, &zero, c.get(), CUDA_R_32F, 2, 0,
                                       1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
      << "alpha NULL";
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE,
            cublasGemmEx(handle_, N, N, 2, 2, 2, &one, a.get(), CUDA_R_32F, 2, b.get(), CUDA_R_32F,
                         2, &zero, c.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         static_cast<cublasGemmAlgo_t>(50)))
      << "an algorithm that does not exist";
  EXPECT_EQ(CUBLAS_STATUS_NOT_SUPPORTED,
            ex(N, N, 2, 2, 2, 2, 2, 2, 1, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_32F))
      << "double data, 32F compute";
  EXPECT_EQ(CUBLAS_STATUS_NOT_SUPPORTED, ex(N, N, 2, 2, 2, 2, 2, 2, 1, CUDA_R_32F, CUDA_R_16F))
      << "float inputs into a half output";
  EXPECT_EQ(CUBLAS_STATUS_NOT_SUPPORTED,
            ex(N, N, 2, 2, 2, 2, 2, 2, 1, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F))
      << "16F compute is not emulated";
  EXPECT_EQ(CUBLAS_STATUS_NOT_SUPPORTED,
            ex(N, N, 2, 2, 2, 2, 2, 2, 1, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F_FAST_TF32))
      << "FAST_TF32 needs float data";
  EXPECT_EQ(CUBLAS_STATUS_NOT_SUPPORTED,
            cublasGemmStridedBatchedEx(handle_, N, N, 2, 2, 2, &one, a.get(), CUDA_R_32F, 2, 0,
                                       b.get(), CUDA_R_16F, 2, 0, &zero, c.get(), CUDA_R_32F, 2, 0,
                                       1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
      << "A and B of different types";
  // What passes the checks but has nothing to compute.
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, ex(T, N, 3, 2, 4, 4, 4, 3, 0)) << "lda = k for op T, batch 0";
  EXPECT_EQ(CUBLAS_STATUS_SUCCESS, ex(N, N, 0, 0, 0, 1, 1, 1)) << "an empty product";
  sync();
  EXPECT_EQ(std::vector<float>(64, 3), c.download()) << "a failed or empty call wrote C";
}

TEST_F(CublasTest, ADestroyedOrNullHandleIsNotInitialized) {
  const float one = 1, zero = 0;
  DeviceBuffer<float> a(4), b(4), c(4);
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasDestroy(handle_));
  cublasHandle_t gone = handle_;
  handle_ = nullptr;
  EXPECT_EQ(CUBLAS_STATUS_NOT_INITIALIZED, cublasSetStream(gone, stream_));
  EXPECT_EQ(CUBLAS_STATUS_NOT_INITIALIZED, cublasDestroy(gone));
  EXPECT_EQ(CUBLAS_STATUS_NOT_INITIALIZED,
            cublasSgemm(gone, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a.get(), 2, b.get(), 2,
                        &zero, c.get(), 2));
  EXPECT_EQ(CUBLAS_STATUS_NOT_INITIALIZED,
            cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a.get(), 2, b.get(), 2,
                        &zero, c.get(), 2));
  EXPECT_EQ(CUBLAS_STATUS_INVALID_VALUE, cublasCreate(nullptr));
}

// The product runs on the handle's stream after the call returned; alpha and
// beta are read at the call (host pointer mode) or when it runs (device mode).
TEST_F(CublasTest, TheProductRunsInStreamOrderWithScalarsReadPerPointerMode) {
  DeviceBuffer<float> a(std::vector<float>{2}), b(std::vector<float>{3}),
      c(std::vector<float>{100});
  {
    StreamGate gate(stream_);
    float alpha = 1, beta = 1;
    ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha,
                                                 a.get(), 1, b.get(), 1, &beta, c.get(), 1));
    alpha = 1000, beta = 1000;  // too late: read at the call
    EXPECT_EQ(std::vector<float>{100}, c.download()) << "computed before the stream got to it";
    EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(stream_));
    cudaGetLastError();
  }
  sync();
  EXPECT_EQ(std::vector<float>{106}, c.download());

  DeviceBuffer<float> scalars(std::vector<float>{1, 0});  // alpha, beta in device memory
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_DEVICE));
  {
    StreamGate gate(stream_);
    ASSERT_EQ(CUBLAS_STATUS_SUCCESS,
              cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, scalars.get(), a.get(), 1,
                          b.get(), 1, scalars.get() + 1, c.get(), 1));
    scalars.upload({10, 0});  // read when the product runs
  }
  sync();
  EXPECT_EQ(std::vector<float>{60}, c.download());
}

TEST_F(CublasTest, ACapturedProductIsRecordedAndRunsOnEachGraphLaunch) {
  DeviceBuffer<float> a(std::vector<float>{2}), b(std::vector<float>{3}), c(std::vector<float>{1});
  const float one = 1;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one,
                                               a.get(), 1, b.get(), 1, &one, c.get(), 1));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(stream_, &graph));
  sync();
  EXPECT_EQ(std::vector<float>{1}, c.download()) << "the captured product ran";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream_));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream_));
  sync();
  EXPECT_EQ(std::vector<float>{13}, c.download()) << "C += A B, twice";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(CublasTest, TheLegacyStreamIsTheDefault) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasCreate(&h));
  cudaStream_t got = reinterpret_cast<cudaStream_t>(0x1);
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasGetStream(h, &got));
  EXPECT_EQ(nullptr, got);
  DeviceBuffer<float> a(std::vector<float>{2}), b(std::vector<float>{3}), c(1);
  const float one = 1, zero = 0;
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.get(),
                                               1, b.get(), 1, &zero, c.get(), 1));
  EXPECT_EQ(std::vector<float>{6}, c.download()) << "cudaMemcpy waits for the legacy stream";
  cublasDestroy(h);
}

}  // namespace
