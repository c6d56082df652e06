// bfloat16 matrix products on the CPU through oneDNN (tensor/cpu/
// OneDnnMatmul.h): mm, bmm (shared and transposed operands), linear with and
// without bias, forward and backward, against the float32 products rounded
// once; no float32 copies of the operands.  Skips where oneDNN has no
// bfloat16 matmul kernel on this CPU (the ops then widen, as tested in
// half_ops_test).
#include "tensor/CpuMemory.h"
#include "tensor/cpu/OneDnnMatmul.h"
#include "tensor/native/Linalg.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor sample(IntList sizes, uint64_t seed) {
  Generator gen(seed);
  return (rand(sizes, kFloat32, &gen) * 4.0 - 2.0).to(kBFloat16);
}

Tensor wide(const Tensor& t) { return t.to(kFloat32); }

// got (bfloat16) against want (float32) rounded once: within one bfloat16
// unit of the largest value (the products accumulate in another order).
::testing::AssertionResult RoundedClose(const Tensor& got, const Tensor& want) {
  if (got.dtype() != kBFloat16) return ::testing::AssertionFailure() << got.describe();
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << got.describe() << " vs " << want.describe();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  return AllClose(wide(got), wide(want.to(kBFloat16)), 0, 8e-3 * scale);
}

class OneDnnMatmul : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::onednn::bf16_matmul_available())
      GTEST_SKIP() << "oneDNN has no bfloat16 matmul kernel on this CPU";
  }
};

TEST_F(OneDnnMatmul, MmEveryLayout) {
  for (const auto& s : std::vector<std::vector<int64_t>>{{3, 5, 4}, {64, 33, 65}, {1, 7, 1}, {128, 256, 96}}) {
    const Tensor a = sample({s[0], s[1]}, 1), b = sample({s[1], s[2]}, 2);
    EXPECT_TRUE(RoundedClose(native::mm(a, b), native::mm(wide(a), wide(b))));
    const Tensor at = sample({s[1], s[0]}, 3).t(), bt = sample({s[2], s[1]}, 4).t();
    EXPECT_TRUE(RoundedClose(native::mm(at, bt), native::mm(wide(at), wide(bt))));
    const Tensor sliced = sample({s[0], 2 * s[1]}, 5).narrow(1, 1, s[1]);  // padded rows
    EXPECT_TRUE(RoundedClose(native::mm(sliced, b), native::mm(wide(sliced), wide(b))));
  }
  // An empty inner size gives zeros.
  EXPECT_TRUE(RoundedClose(native::mm(sample({3, 0}, 6), sample({0, 4}, 7)), zeros({3, 4})));
}

TEST_F(OneDnnMatmul, BmmSharedAndTransposedBatches) {
  const Tensor a = sample({4, 9, 17}, 8), b = sample({4, 17, 6}, 9);
  EXPECT_TRUE(RoundedClose(native::bmm(a, b), native::bmm(wide(a), wide(b))));
  const Tensor shared = sample({1, 17, 6}, 10).expand({4, 17, 6});
  EXPECT_TRUE(RoundedClose(native::bmm(a, shared), native::bmm(wide(a), wide(shared))));
  const Tensor bt = sample({4, 6, 17}, 11).transpose(1, 2);
  EXPECT_TRUE(RoundedClose(native::bmm(a, bt), native::bmm(wide(a), wide(bt))));
  const Tensor shared_a = sample({1, 9, 17}, 18).expand({4, 9, 17});
  EXPECT_TRUE(RoundedClose(native::bmm(shared_a, b), native::bmm(wide(shared_a), wide(b))));
  const Tensor at = sample({4, 17, 9}, 19).transpose(1, 2);
  EXPECT_TRUE(RoundedClose(native::bmm(at, shared), native::bmm(wide(at), wide(shared))));
}

TEST_F(OneDnnMatmul, LinearForwardAndBackward) {
  const Tensor x = sample({32, 40}, 12), w = sample({24, 40}, 13), bias = sample({24}, 14);
  EXPECT_TRUE(RoundedClose(native::linear(x, w, bias), native::linear(wide(x), wide(w), wide(bias))));
  EXPECT_TRUE(RoundedClose(native::linear(x, w, Tensor()), native::linear(wide(x), wide(w), Tensor())));
  const Tensor gy = sample({32, 24}, 15);
  Tensor gi, gw, gb, gi32, gw32, gb32;
  native::linear_backward(gy, x, w, true, true, true, gi, gw, gb);
  native::linear_backward(wide(gy), wide(x), wide(w), true, true, true, gi32, gw32, gb32);
  EXPECT_TRUE(RoundedClose(gi, gi32));
  EXPECT_TRUE(RoundedClose(gw, gw32));
  EXPECT_TRUE(RoundedClose(gb, gb32));
}

TEST_F(OneDnnMatmul, NoFloat32Copies) {
  if (cpu::allocator_mode() != "caching") GTEST_SKIP() << "needs the caching CPU allocator's statistics";
  const Tensor a = sample({512, 512}, 16), b = sample({512, 512}, 17);
  cpu::reset_peak_memory_stats();
  const int64_t before = cpu::memory_allocated();
  const Tensor c = native::mm(a, b);
  // The bfloat16 result and oneDNN's scratch (packed blocks), not 4-byte copies.
  EXPECT_LT(cpu::max_memory_allocated() - before, c.nbytes() + a.nbytes());
  EXPECT_EQ(c.dtype(), kBFloat16);
}

}  // namespace
}  // namespace loom
