// Views alias their base (storage and version counter), and writes through
// a view show up in the base; copies (clone, contiguous, copy_, to) do not alias.
#include "tensor/native/Copy.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor iota(int64_t n) { return arange(n, kFloat32); }

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

TEST(Views, ViewSharesStorageAndVersion) {
  Tensor base = iota(12);
  Tensor v = base.view({3, 4});
  EXPECT_TRUE(v.storage().is_alias_of(base.storage()));
  EXPECT_EQ(v.sizes(), (IntList{3, 4}));
  EXPECT_EQ(v.strides(), (IntList{4, 1}));
  const uint64_t before = base.version();
  v.mul_(2.0);
  EXPECT_EQ(base.version(), before + 1);
  EXPECT_EQ(v.version(), base.version());
  EXPECT_FLOAT_EQ(values(base)[11], 22.0f);
  Tensor inferred = base.view({-1, 6});
  EXPECT_EQ(inferred.sizes(), (IntList{2, 6}));
}

TEST(Views, ViewOfTransposedTensorThrowsMentioningReshape) {
  Tensor m = iota(6).view({2, 3}).t();
  EXPECT_LOOM_ERROR(m.view({6}), "view", "reshape");
  EXPECT_LOOM_ERROR(iota(6).view({4, 2}), "view", "[4, 2]", "invalid for input of size 6");
  EXPECT_LOOM_ERROR(iota(6).view({-1, -1}), "only one dimension can be inferred");
  // reshape copies instead.
  Tensor r = m.reshape({6});
  EXPECT_FALSE(r.storage().is_alias_of(m.storage()));
  EXPECT_EQ(values(r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // ... and views when it can.
  Tensor base = iota(6);
  EXPECT_TRUE(base.reshape({3, 2}).storage().is_alias_of(base.storage()));
}

TEST(Views, PermuteWritesThroughToBase) {
  Tensor base = iota(12);
  Tensor p = base.view({2, 3, 2}).permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (IntList{2, 2, 3}));
  EXPECT_EQ(p.strides(), (IntList{1, 6, 2}));
  EXPECT_EQ(values(p), (std::vector<float>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}));
  native::copy_(p.select(0, 1), zeros({2, 3}));  // every odd element of base
  EXPECT_EQ(values(base), (std::vector<float>{0, 0, 2, 0, 4, 0, 6, 0, 8, 0, 10, 0}));
  EXPECT_LOOM_ERROR(base.view({2, 6}).permute({0}), "permute", "got 1 dims");
  EXPECT_LOOM_ERROR(base.view({2, 6}).permute({1, 1}), "permute", "repeats");
}

TEST(Views, TransposeAndT) {
  Tensor base = iota(6);
  Tensor m = base.view({2, 3});
  Tensor t = m.t();
  EXPECT_EQ(t.sizes(), (IntList{3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(values(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  t.select(0, 2).mul_(10.0);  // column 2 of m
  EXPECT_EQ(values(base), (std::vector<float>{0, 1, 20, 3, 4, 50}));
  EXPECT_TRUE(m.transpose(-1, 0).storage().is_alias_of(base.storage()));
  // 1-D and 0-D t() return the tensor itself.
  Tensor v = iota(4);
  EXPECT_TRUE(v.t().is_same(v));
  EXPECT_LOOM_ERROR(iota(8).view({2, 2, 2}).t(), "t: expects a tensor with <= 2 dimensions",
                    "3-D");
  EXPECT_LOOM_ERROR(m.transpose(0, 2), "transpose", "dimension out of range");
}

TEST(Views, NarrowWritesThroughAndChecksRange) {
  Tensor base = iota(12);
  Tensor m = base.view({4, 3});
  Tensor n = m.narrow(0, 1, 2);
  EXPECT_EQ(n.sizes(), (IntList{2, 3}));
  EXPECT_EQ(n.storage_offset(), 3);
  EXPECT_TRUE(n.is_contiguous());
  float* p = n.data_ptr<float>();
  for (int i = 0; i < 6; ++i) p[i] = -1.0f;
  EXPECT_EQ(values(base), (std::vector<float>{0, 1, 2, -1, -1, -1, -1, -1, -1, 9, 10, 11}));
  EXPECT_EQ(values(m.narrow(1, -1, 1)), (std::vector<float>{2, -1, -1, 11}));
  EXPECT_LOOM_ERROR(m.narrow(0, 3, 2), "narrow", "start (3) + length (2)",
                    "exceeds dimension size (4)");
  EXPECT_LOOM_ERROR(m.narrow(2, 0, 1), "narrow", "dimension out of range");
}

TEST(Views, SelectWritesThroughAndChecksRange) {
  Tensor base = iota(12);
  Tensor m = base.view({4, 3});
  Tensor col = m.select(1, 2);
  EXPECT_EQ(col.sizes(), (IntList{4}));
  EXPECT_EQ(col.strides(), (IntList{3}));
  native::copy_(col, tensor<float>({100, 200, 300, 400}));
  EXPECT_EQ(values(base), (std::vector<float>{0, 1, 100, 3, 4, 200, 6, 7, 300, 9, 10, 400}));
  EXPECT_EQ(values(m.select(0, -1)), (std::vector<float>{9, 10, 400}));
  Tensor scalar = m.select(0, 0).select(0, 1);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_FLOAT_EQ(scalar.item<float>(), 1.0f);
  EXPECT_LOOM_ERROR(m.select(1, 3), "select", "index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_LOOM_ERROR(m.select(0, -5), "select", "index -5", "size 4");
  EXPECT_LOOM_ERROR(scalar.select(0, 0), "select", "0-dimensional");
}

TEST(Views, SliceWithStepWritesThrough) {
  Tensor base = iota(10);
  Tensor s = base.slice(0, 1, 8, 3);
  EXPECT_EQ(values(s), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(s.strides(), (IntList{3}));
  native::copy_(s, tensor<float>({-1, -2, -3}));
  EXPECT_EQ(values(base), (std::vector<float>{0, -1, 2, 3, -2, 5, 6, -3, 8, 9}));
  // Python-style clamping and negative bounds.
  EXPECT_EQ(values(base.slice(0, -3, 100)), (std::vector<float>{-3, 8, 9}));
  EXPECT_EQ(base.slice(0, 5, 2).numel(), 0);
  Tensor m = iota(12).view({3, 4});
  EXPECT_EQ(values(m.slice(1, 0, 4, 2)), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  EXPECT_LOOM_ERROR(base.slice(0, 0, 5, 0), "slice", "step must be positive");
}

TEST(Views, SqueezeUnsqueezeFlatten) {
  Tensor base = iota(6);
  Tensor x = base.view({2, 1, 3, 1});
  EXPECT_EQ(x.squeeze().sizes(), (IntList{2, 3}));
  EXPECT_EQ(x.squeeze(1).sizes(), (IntList{2, 3, 1}));
  EXPECT_EQ(x.squeeze(-1).sizes(), (IntList{2, 1, 3}));
  EXPECT_EQ(x.squeeze(0).sizes(), (IntList{2, 1, 3, 1}));  // size 2: unchanged
  EXPECT_EQ(base.unsqueeze(0).sizes(), (IntList{1, 6}));
  EXPECT_EQ(base.unsqueeze(-1).sizes(), (IntList{6, 1}));
  EXPECT_EQ(x.flatten().sizes(), (IntList{6}));
  EXPECT_EQ(iota(24).view({2, 3, 4}).flatten(1).sizes(), (IntList{2, 12}));
  EXPECT_EQ(iota(24).view({2, 3, 4}).flatten(0, 1).sizes(), (IntList{6, 4}));
  Tensor sq = x.squeeze();
  EXPECT_TRUE(sq.storage().is_alias_of(base.storage()));
  sq.data_ptr<float>()[4] = 42.0f;
  EXPECT_FLOAT_EQ(values(base)[4], 42.0f);
  Tensor uq = base.unsqueeze(1);
  uq.mul_(-1.0);
  EXPECT_FLOAT_EQ(values(base)[4], -42.0f);
  EXPECT_LOOM_ERROR(base.unsqueeze(3), "unsqueeze", "dimension out of range");
  EXPECT_LOOM_ERROR(iota(6).view({2, 3}).flatten(1, 0), "flatten", "start_dim");
}

TEST(Views, ExpandHasZeroStrides) {
  Tensor base = iota(3);
  Tensor e = base.view({3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (IntList{1, 0}));
  EXPECT_TRUE(e.storage().is_alias_of(base.storage()));
  EXPECT_EQ(values(e), (std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(base.expand({2, 3}).sizes(), (IntList{2, 3}));
  EXPECT_LOOM_ERROR(base.expand({4}), "expand", "must match the existing size (3)");
}

TEST(Views, AsStridedWritesThroughAndChecksBounds) {
  Tensor base = iota(9);
  Tensor a = base.as_strided({2, 2}, {3, 1}, 1);
  EXPECT_EQ(values(a), (std::vector<float>{1, 2, 4, 5}));
  a.mul_(0.0);
  EXPECT_EQ(values(base), (std::vector<float>{0, 0, 0, 3, 0, 0, 6, 7, 8}));
  EXPECT_LOOM_ERROR(base.as_strided({3, 3}, {3, 1}, 1), "as_strided", "reaches element 9",
                    "storage of 9 elements");
  EXPECT_LOOM_ERROR(base.as_strided({2}, {1, 1}, 0), "as_strided", "1 sizes but 2 strides");
}

TEST(Views, SplitChunkUnbindAliasTheBase) {
  Tensor base = iota(10);
  auto parts = base.split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(values(parts[0]), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(values(parts[2]), (std::vector<float>{8, 9}));  // last one smaller
  parts[1].mul_(-1.0);
  EXPECT_EQ(values(base), (std::vector<float>{0, 1, 2, 3, -4, -5, -6, -7, 8, 9}));

  auto sized = iota(10).split_with_sizes({3, 0, 7});
  ASSERT_EQ(sized.size(), 3u);
  EXPECT_EQ(sized[1].numel(), 0);
  EXPECT_EQ(values(sized[2])[0], 3.0f);
  EXPECT_LOOM_ERROR(iota(10).split_with_sizes({3, 6}), "split_with_sizes",
                    "must sum to the size of dimension 0 (10)", "sum to 9");
  EXPECT_LOOM_ERROR(iota(10).split(0), "split", "split_size must be positive");

  // chunk: ceil(size / chunks) each, so 6 in 4 chunks gives 3 chunks of 2.
  auto chunks = iota(6).chunk(4);
  ASSERT_EQ(chunks.size(), 3u);
  for (const Tensor& c : chunks) EXPECT_EQ(c.numel(), 2);
  auto c10 = iota(10).chunk(3);
  ASSERT_EQ(c10.size(), 3u);
  EXPECT_EQ(c10[0].numel(), 4);
  EXPECT_EQ(c10[2].numel(), 2);
  auto cols = iota(12).view({3, 4}).chunk(2, 1);
  EXPECT_EQ(values(cols[1]), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_LOOM_ERROR(iota(6).chunk(0), "chunk", "greater than 0");

  Tensor m = iota(6).view({2, 3});
  auto rows = m.unbind(0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(values(rows[1]), (std::vector<float>{3, 4, 5}));
  auto columns = m.unbind(1);
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(values(columns[2]), (std::vector<float>{2, 5}));
  columns[0].mul_(7.0);
  EXPECT_EQ(values(m), (std::vector<float>{0, 1, 2, 21, 4, 5}));
}

TEST(Views, ZeroDimTensors) {
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(s.unsqueeze(0).sizes(), (IntList{1}));
  EXPECT_EQ(s.unsqueeze(-1).sizes(), (IntList{1}));
  EXPECT_EQ(s.flatten().sizes(), (IntList{1}));
  EXPECT_EQ(s.view({1, 1}).sizes(), (IntList{1, 1}));
  EXPECT_EQ(s.squeeze().dim(), 0);
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.transpose(0, -1).dim(), 0);
  EXPECT_TRUE(s.t().is_same(s));
  EXPECT_TRUE(s.unsqueeze(0).storage().is_alias_of(s.storage()));
  EXPECT_LOOM_ERROR(s.transpose(0, 1), "transpose", "dimension out of range");
  EXPECT_LOOM_ERROR(s.squeeze(2), "squeeze", "dimension out of range");
  EXPECT_LOOM_ERROR(s.split(1), "split", "0-dimensional");
  EXPECT_LOOM_ERROR(s.narrow(0, 0, 1), "narrow", "0-dimensional");
}

TEST(Views, ViewsKeepDeviceAndDtype) {
  Tensor base = arange(6, TensorOptions(kFloat64).device(Device("cpu:1")));
  Tensor v = base.view({2, 3}).t().narrow(0, 1, 2);
  EXPECT_EQ(v.device(), Device("cpu:1"));
  EXPECT_EQ(v.dtype(), kFloat64);
  EXPECT_EQ(v.to_vector<double>(), (std::vector<double>{1, 4, 2, 5}));
}

TEST(Copies, CloneContiguousDoNotAlias) {
  Tensor base = iota(6).view({2, 3});
  Tensor c = base.clone();
  EXPECT_FALSE(c.storage().is_alias_of(base.storage()));
  EXPECT_TRUE(AllClose(c, base));
  EXPECT_TRUE(base.contiguous().is_same(base));
  Tensor tc = base.t().contiguous();
  EXPECT_TRUE(tc.is_contiguous());
  EXPECT_FALSE(tc.storage().is_alias_of(base.storage()));
  EXPECT_EQ(values(tc), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Copies, CopyBroadcastsConvertsAndCrossesDevices) {
  Tensor dst = zeros({2, 3});
  dst.copy_(tensor<int64_t>({1, 2, 3}));  // broadcast + int64 -> float32
  EXPECT_EQ(values(dst), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  Tensor other = zeros({2, 3}, TensorOptions(kFloat64).device(Device("cpu:1")));
  other.copy_(dst);
  EXPECT_EQ(other.device(), Device("cpu:1"));
  EXPECT_EQ(other.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  // Through a transposed view.
  Tensor m = zeros({2, 3});
  m.t().copy_(iota(6).view({3, 2}));
  EXPECT_EQ(values(m), (std::vector<float>{0, 2, 4, 1, 3, 5}));
  EXPECT_LOOM_ERROR(dst.copy_(zeros({4})), "expand", "[2, 3]");
  EXPECT_LOOM_ERROR(dst.copy_(Tensor()), "copy_", "src", "undefined");
}

TEST(Copies, ToMovesBetweenLogicalCpuDevices) {
  Tensor x = iota(4);
  Tensor y = x.to(Device("cpu:1"));
  EXPECT_EQ(y.device(), Device("cpu:1"));
  EXPECT_FALSE(y.storage().is_alias_of(x.storage()));
  EXPECT_EQ(values(y), values(x));
  EXPECT_TRUE(x.to(Device("cpu")).is_same(x));  // nothing to do
  Tensor d = x.to(kFloat64);
  EXPECT_EQ(d.dtype(), kFloat64);
}

}  // namespace
}  // namespace loom
