// cat and stack: values along every dim, PyTorch's skipping of [0] tensors,
// dtype promotion, non-contiguous inputs, the parallel path, and errors.
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

Tensor iota(int64_t n, int64_t start = 0) { return arange(start, start + n, 1, kFloat32); }

TEST(Cat, AlongEachDim) {
  Tensor a = iota(6).view({2, 3});
  Tensor b = iota(3, 100).view({1, 3});
  Tensor c0 = cat({a, b}, 0);
  EXPECT_EQ(c0.sizes(), (IntList{3, 3}));
  EXPECT_EQ(c0.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 100, 101, 102}));
  Tensor d = iota(4, 10).view({2, 2});
  Tensor c1 = cat({a, d}, 1);
  EXPECT_EQ(c1.sizes(), (IntList{2, 5}));
  EXPECT_EQ(c1.to_vector<float>(), (std::vector<float>{0, 1, 2, 10, 11, 3, 4, 5, 12, 13}));
  EXPECT_TRUE(AllClose(cat({a, d}, -1), c1));
  EXPECT_FALSE(c1.storage().is_alias_of(a.storage()));
  // A single tensor is copied.
  Tensor single = cat({a});
  EXPECT_TRUE(AllClose(single, a));
  EXPECT_FALSE(single.storage().is_alias_of(a.storage()));
}

TEST(Cat, ThreeDimsMiddleAndNonContiguousInputs) {
  Tensor a = iota(12).view({2, 3, 2});
  Tensor b = iota(8, 50).view({2, 2, 2});
  Tensor bt = iota(8, 50).view({2, 2, 2}).transpose(1, 2);  // non-contiguous
  Tensor c = cat({a, b, bt}, 1);
  EXPECT_EQ(c.sizes(), (IntList{2, 7, 2}));
  // Check against element-wise reads.
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 2; ++k) {
      for (int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(c.select(0, i).select(0, j).select(0, k).item<float>(),
                  a.select(0, i).select(0, j).select(0, k).item<float>());
      for (int64_t j = 0; j < 2; ++j) {
        EXPECT_EQ(c.select(0, i).select(0, 3 + j).select(0, k).item<float>(),
                  b.select(0, i).select(0, j).select(0, k).item<float>());
        EXPECT_EQ(c.select(0, i).select(0, 5 + j).select(0, k).item<float>(),
                  bt.select(0, i).select(0, j).select(0, k).item<float>());
      }
    }
}

TEST(Cat, SkipsLegacyEmptyTensorsAndPromotes) {
  Tensor a = iota(6).view({2, 3});
  Tensor c = cat({zeros({0}), a, zeros({0})}, 1);
  EXPECT_TRUE(AllClose(c, a));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).sizes(), (IntList{0}));
  // Empty tensors of the right rank join normally.
  EXPECT_EQ(cat({zeros({0, 3}), a}).sizes(), (IntList{2, 3}));
  // int64 + float32 -> float32.
  Tensor mixed = cat({tensor<int64_t>({1, 2}), tensor<float>({0.5f}, {1})});
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_EQ(mixed.to_vector<float>(), (std::vector<float>{1, 2, 0.5f}));
  Tensor ints = cat({tensor<int64_t>({1, 2}), tensor<int64_t>({3}, {1})});
  EXPECT_EQ(ints.dtype(), kInt64);
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Cat, LargeInputsUseTheParallelPath) {
  // outer > 1 (dim 1) and outer == 1 (dim 0), big enough to split over threads.
  Tensor a = randn({300, 1000}, kFloat32);
  Tensor b = randn({300, 500}, kFloat32);
  Tensor c = cat({a, b}, 1);
  EXPECT_TRUE(AllClose(c.narrow(1, 0, 1000), a, 0, 0));
  EXPECT_TRUE(AllClose(c.narrow(1, 1000, 500), b, 0, 0));
  Tensor r = cat({a, a}, 0);
  EXPECT_TRUE(AllClose(r.narrow(0, 300, 300), a, 0, 0));
}

TEST(Cat, ErrorsNameTheProblem) {
  Tensor a = zeros({2, 3});
  EXPECT_LOOM_ERROR(cat({}), "cat", "non-empty");
  EXPECT_LOOM_ERROR(cat({a, zeros({2, 4})}, 0), "cat", "Expected size 3 but got size 4",
                    "tensor number 1");
  EXPECT_LOOM_ERROR(cat({a, zeros({2, 3, 1})}), "cat", "same number of dimensions");
  EXPECT_LOOM_ERROR(cat({a, a}, 2), "cat", "dimension out of range");
  EXPECT_LOOM_ERROR(cat({a, Tensor()}), "cat", "tensors[1]", "undefined");
  EXPECT_LOOM_ERROR(cat({scalar_tensor(1.0), scalar_tensor(2.0)}), "cat", "zero-dimensional");
}

TEST(Cat, MixingDevicesThrowsNamingBoth) {
  Tensor a = zeros({2});
  Tensor b = zeros({2}, Device("cpu:1"));
  EXPECT_LOOM_ERROR(cat({a, b}), "cat", "cpu (argument 'tensors[0]')",
                    "cpu:1 (argument 'tensors[1]')");
  Tensor c = cat({b, b});
  EXPECT_EQ(c.device(), Device("cpu:1"));
}

TEST(Stack, NewDimAnywhere) {
  Tensor a = iota(3), b = iota(3, 10);
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.sizes(), (IntList{2, 3}));
  EXPECT_EQ(s0.to_vector<float>(), (std::vector<float>{0, 1, 2, 10, 11, 12}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.sizes(), (IntList{3, 2}));
  EXPECT_EQ(s1.to_vector<float>(), (std::vector<float>{0, 10, 1, 11, 2, 12}));
  EXPECT_TRUE(AllClose(stack({a, b}, -1), s1));
  Tensor scalars = stack({scalar_tensor(1.0), scalar_tensor(2.0)});
  EXPECT_EQ(scalars.sizes(), (IntList{2}));
  EXPECT_EQ(stack({zeros({0}), zeros({0})}).sizes(), (IntList{2, 0}));
  EXPECT_LOOM_ERROR(stack({a, iota(4)}), "stack", "equal size", "[3] at entry 0",
                    "[4] at entry 1");
  EXPECT_LOOM_ERROR(stack({a, b}, 3), "stack", "dimension out of range");
  EXPECT_LOOM_ERROR(stack({}), "stack", "non-empty");
}

}  // namespace
}  // namespace loom
