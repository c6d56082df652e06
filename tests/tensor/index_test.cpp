// index_select / index_add / gather / scatter_add: values (repeated indices,
// non-contiguous inputs, every dim), out-of-place semantics, and errors that
// name the index value, the dim and its size.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor iota(int64_t n) { return arange(n, kFloat32); }
Tensor idx(std::vector<int64_t> v, IntList sizes = {}) { return tensor<int64_t>(v, sizes); }

TEST(IndexSelect, PicksAlongEachDim) {
  Tensor m = iota(12).view({3, 4});
  Tensor rows = m.index_select(0, idx({2, 0, 2}));
  EXPECT_EQ(rows.sizes(), (IntList{3, 4}));
  EXPECT_EQ(rows.to_vector<float>(),
            (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor cols = index_select(m, -1, idx({3, 1}));
  EXPECT_EQ(cols.sizes(), (IntList{3, 2}));
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{3, 1, 7, 5, 11, 9}));
  // Non-contiguous self, int32 index, 0-dim index, an empty index.
  Tensor t = m.t();
  EXPECT_EQ(t.index_select(1, tensor<int32_t>({1})).to_vector<float>(),
            (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(m.index_select(0, scalar_tensor(1, kInt64)).sizes(), (IntList{1, 4}));
  EXPECT_EQ(m.index_select(1, zeros({0}, kInt64)).sizes(), (IntList{3, 0}));
  // A copy, not a view.
  EXPECT_FALSE(rows.storage().is_alias_of(m.storage()));
}

TEST(IndexSelect, LargeRowsMatchSelect) {
  Tensor table = randn({1000, 64});
  Tensor i = randint(0, 1000, {5000});
  Tensor out = table.index_select(0, i);
  const auto iv = i.to_vector<int64_t>();
  for (int64_t k : {0, 1, 2500, 4999})
    EXPECT_TRUE(AllClose(out.select(0, k), table.select(0, iv[k]), 0, 0));
}

TEST(IndexSelect, ErrorsNameIndexDimAndSize) {
  Tensor m = zeros({3, 4});
  EXPECT_LOOM_ERROR(m.index_select(0, idx({0, 5})), "index_select",
                    "index 5 is out of bounds for dimension 0 with size 3");
  EXPECT_LOOM_ERROR(m.index_select(1, idx({-1})), "index_select",
                    "index -1 is out of bounds for dimension 1 with size 4");
  EXPECT_LOOM_ERROR(m.index_select(0, tensor<float>({0})), "index_select", "int64", "float32");
  EXPECT_LOOM_ERROR(m.index_select(0, idx({0, 1}, {1, 2})), "index_select", "1-D");
  EXPECT_LOOM_ERROR(m.index_select(2, idx({0})), "index_select", "dimension out of range");
  EXPECT_LOOM_ERROR(m.index_select(0, Tensor()), "index_select", "'index'", "undefined");
}

TEST(IndexSelect, MixingDevicesThrowsNamingBoth) {
  Tensor m = zeros({3, 4}, Device("cpu:1"));
  EXPECT_LOOM_ERROR(m.index_select(0, idx({0})), "index_select", "cpu:1 (argument 'self')",
                    "cpu (argument 'index')");
  Tensor ok = m.index_select(0, idx({0}).to(Device("cpu:1")));
  EXPECT_EQ(ok.device(), Device("cpu:1"));
}

TEST(IndexAdd, AccumulatesRepeatedIndices) {
  Tensor self = ones({3, 2});
  Tensor src = iota(8).view({4, 2});
  Tensor out = index_add(self, 0, idx({2, 0, 2, 2}), src);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{3, 4, 1, 1, 1 + 0 + 4 + 6,
                                                        1 + 1 + 5 + 7}));
  EXPECT_EQ(self.to_vector<float>(), std::vector<float>(6, 1));  // out-of-place
  Tensor cols = index_add(zeros({2, 3}), 1, idx({1, 1}), ones({2, 2}));
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{0, 2, 0, 0, 2, 0}));
  // dim 0 with one row (the inner-parallel path).
  Tensor flat = index_add(zeros({4}), 0, idx({3, 3, 0}), tensor<float>({1, 2, 3}));
  EXPECT_EQ(flat.to_vector<float>(), (std::vector<float>{3, 0, 0, 3}));
  EXPECT_LOOM_ERROR(index_add(self, 0, idx({3}), zeros({1, 2})), "index_add",
                    "index 3 is out of bounds for dimension 0 with size 3");
  EXPECT_LOOM_ERROR(index_add(self, 0, idx({0}), zeros({2, 2})), "index_add", "source");
}

TEST(Gather, PicksPerPosition) {
  Tensor m = iota(6).view({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  Tensor g1 = m.gather(1, idx({2, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(g1.to_vector<float>(), (std::vector<float>{2, 0, 4, 4}));
  Tensor g0 = m.gather(0, idx({1, 0, 1}, {1, 3}));
  EXPECT_EQ(g0.to_vector<float>(), (std::vector<float>{3, 1, 5}));
  // Non-contiguous self: m.t() is [[0, 3], [1, 4], [2, 5]].
  Tensor gt = m.t().gather(1, idx({1, 0, 1}, {3, 1}));
  EXPECT_EQ(gt.to_vector<float>(), (std::vector<float>{3, 1, 5}));
  // Index smaller than self in the other dims.
  Tensor small = iota(12).view({3, 4}).gather(1, idx({3, 0}, {2, 1}));
  EXPECT_EQ(small.to_vector<float>(), (std::vector<float>{3, 4}));
  // Integer self.
  Tensor ints = tensor<int64_t>({10, 20, 30}).gather(0, idx({2, 2, 0}));
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{30, 30, 10}));
}

TEST(Gather, ErrorsNameIndexDimAndSize) {
  Tensor m = zeros({2, 3});
  EXPECT_LOOM_ERROR(m.gather(1, idx({0, 3}, {2, 1})), "gather",
                    "index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_LOOM_ERROR(m.gather(1, idx({0, 1})), "gather", "same number of dimensions");
  EXPECT_LOOM_ERROR(m.gather(1, idx({0, 0, 0}, {3, 1})), "gather",
                    "size does not match at dimension 0");
  EXPECT_LOOM_ERROR(m.gather(0, tensor<int32_t>({0, 0}, {1, 2})), "gather", "int64");
}

TEST(ScatterAdd, AddsOutOfPlace) {
  Tensor self = zeros({2, 3});
  Tensor src = iota(6).view({2, 3});
  Tensor out = self.scatter_add(1, idx({0, 0, 2, 1, 1, 1}, {2, 3}), src);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0 + 1, 0, 2, 0, 3 + 4 + 5, 0}));
  EXPECT_EQ(self.to_vector<float>(), std::vector<float>(6, 0));
  // dim 0, src larger than index (only the index's extent is used).
  Tensor out0 = scatter_add(ones({3, 2}), 0, idx({2, 0}, {1, 2}), iota(6).view({3, 2}));
  EXPECT_EQ(out0.to_vector<float>(), (std::vector<float>{1, 2, 1, 1, 1, 1}));
  // Inverse of gather for a permutation.
  Tensor perm = idx({2, 0, 1});
  Tensor v = tensor<float>({5, 6, 7});
  EXPECT_TRUE(AllClose(scatter_add(zeros({3}), 0, perm, v.gather(0, perm)), v));
}

TEST(ScatterAdd, ErrorsNameIndexDimAndSize) {
  Tensor self = zeros({2, 3});
  EXPECT_LOOM_ERROR(self.scatter_add(0, idx({0, 2}, {1, 2}), ones({1, 2})), "scatter_add",
                    "index 2 is out of bounds for dimension 0 with size 2");
  EXPECT_LOOM_ERROR(self.scatter_add(0, idx({0, 0}, {1, 2}), ones({1, 2}, kFloat64)),
                    "scatter_add", "dtype", "float32");
  EXPECT_LOOM_ERROR(self.scatter_add(0, idx({0, 0}, {1, 2}), ones({1, 1})), "scatter_add",
                    "no larger than src");
  Tensor other = zeros({2, 3}, Device("cpu:1"));
  EXPECT_LOOM_ERROR(self.scatter_add(0, idx({0}, {1, 1}), other), "scatter_add", "cpu:1");
}

}  // namespace
}  // namespace loom
