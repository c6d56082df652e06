// Factories: values, dtypes/devices, seeded reproducibility, rough
// distribution checks, from_blob aliasing and deleters, and their errors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "tests/TestUtil.h"

namespace loom {
namespace {

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST(Factory, ZerosOnesFull) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.sizes(), (IntList{2, 3}));
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0));
  EXPECT_EQ(ones({4}, kInt64).to_vector<int64_t>(), std::vector<int64_t>(4, 1));
  Tensor f = full({2, 2}, 2.5, TensorOptions(kFloat64).device(Device("cpu:1")));
  EXPECT_EQ(f.device(), Device("cpu:1"));
  EXPECT_EQ(f.to_vector<double>(), std::vector<double>(4, 2.5));
  EXPECT_EQ(full({3}, true, kBool).to_vector<bool>(), std::vector<bool>(3, true));
  Tensor s = scalar_tensor(7, kInt32);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<int32_t>(), 7);
  EXPECT_EQ(empty({0, 5}).numel(), 0);
  EXPECT_LOOM_ERROR(zeros({2, -1}), "negative size -1", "dim 1");
  EXPECT_LOOM_ERROR(empty({-3}), "empty", "negative size");
}

TEST(Factory, Arange) {
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(2, 11, 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  Tensor fr = arange(0, 1, 0.25);
  EXPECT_EQ(fr.dtype(), kFloat32);
  EXPECT_EQ(fr.to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(3, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(arange(0).numel(), 0);
  EXPECT_LOOM_ERROR(arange(0, 5, 0), "arange", "step must be nonzero");
  EXPECT_LOOM_ERROR(arange(5, 0, 1), "arange", "inconsistent with step sign");
}

TEST(Factory, Linspace) {
  Tensor l = linspace(0, 1, 5);
  EXPECT_TRUE(testing::AllClose(l, tensor<float>({0, 0.25f, 0.5f, 0.75f, 1})));
  EXPECT_EQ(linspace(-1, 1, 7, kFloat64).to_vector<double>().back(), 1.0);  // exact end
  EXPECT_EQ(linspace(3, 3, 1).to_vector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_LOOM_ERROR(linspace(0, 1, -1), "linspace", "non-negative");
}

TEST(Factory, RandIsSeededAndUniform) {
  Generator g1(42), g2(42), g3(43);
  Tensor a = rand({10000}, kFloat64, &g1);
  Tensor b = rand({10000}, kFloat64, &g2);
  Tensor c = rand({10000}, kFloat64, &g3);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_NE(a.to_vector<double>(), c.to_vector<double>());
  const auto v = a.to_vector<double>();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
  EXPECT_NEAR(mean_of(v), 0.5, 0.02);
  EXPECT_NEAR(std_of(v), std::sqrt(1.0 / 12.0), 0.02);
  EXPECT_EQ(rand({2, 2}).dtype(), kFloat32);
  EXPECT_LOOM_ERROR(rand({2}, kInt64), "rand", "floating", "int64");
}

TEST(Factory, RandnIsSeededAndNormal) {
  manual_seed(7);
  Tensor a = randn({20000}, kFloat64);
  manual_seed(7);
  Tensor b = randn({20000}, kFloat64);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  Tensor c = randn({20000}, kFloat64);  // the sequence moves on
  EXPECT_NE(a.to_vector<double>(), c.to_vector<double>());
  const auto v = a.to_vector<double>();
  EXPECT_NEAR(mean_of(v), 0.0, 0.03);
  EXPECT_NEAR(std_of(v), 1.0, 0.03);
  Generator g(1);
  Tensor d = randn({3}, TensorOptions(kFloat32).device(Device("cpu:1")), &g);
  EXPECT_EQ(d.device(), Device("cpu:1"));
  EXPECT_LOOM_ERROR(randn({2}, kBool), "randn", "floating");
}

TEST(Factory, GeneratorGuardOverridesTheDefaultOnThisThreadOnly) {
  Generator& global = default_generator();
  Generator a(1), b(2);
  {
    GeneratorGuard outer(&a);
    EXPECT_EQ(&default_generator(), &a);
    Tensor from_guard = rand({4});  // draws from `a`
    Generator same(1);
    EXPECT_TRUE(testing::AllClose(from_guard, rand({4}, kFloat32, &same), 0, 0));
    {
      GeneratorGuard inner(&b);
      EXPECT_EQ(&default_generator(), &b);
    }
    EXPECT_EQ(&default_generator(), &a);
    Generator* seen_elsewhere = nullptr;
    std::thread([&] { seen_elsewhere = &default_generator(); }).join();
    EXPECT_EQ(seen_elsewhere, &global);
  }
  EXPECT_EQ(&default_generator(), &global);
  EXPECT_LOOM_ERROR(GeneratorGuard(nullptr), "null");
}

TEST(Factory, RandintRangeAndRandpermIsAPermutation) {
  Generator g(3);
  const auto v = randint(-2, 3, {5000}, kInt64, &g).to_vector<int64_t>();
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), -2);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 2);
  EXPECT_EQ(randint(0, 10, {4}, kInt32).dtype(), kInt32);
  EXPECT_LOOM_ERROR(randint(3, 3, {2}), "randint", "low < high");

  Generator gp(5);
  auto perm = randperm(100, kInt64, &gp).to_vector<int64_t>();
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expect(100);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(sorted, expect);
  EXPECT_NE(perm, expect);  // shuffled (probability of identity is 1/100!)
  Generator gp2(5);
  EXPECT_EQ(randperm(100, kInt64, &gp2).to_vector<int64_t>(), perm);
  EXPECT_EQ(randperm(0).numel(), 0);
  EXPECT_LOOM_ERROR(randperm(-1), "randperm", "non-negative");
}

TEST(Factory, LikeFactoriesCopyShapeDtypeDevice) {
  Tensor base = zeros({2, 3}, TensorOptions(kFloat64).device(Device("cpu:1")));
  for (const Tensor& t : {empty_like(base), zeros_like(base), ones_like(base),
                          full_like(base, 4), rand_like(base), randn_like(base)}) {
    EXPECT_EQ(t.sizes(), base.sizes());
    EXPECT_EQ(t.dtype(), kFloat64);
    EXPECT_EQ(t.device(), Device("cpu:1"));
    EXPECT_FALSE(t.storage().is_alias_of(base.storage()));
  }
  EXPECT_EQ(ones_like(base).to_vector<double>(), std::vector<double>(6, 1));
  EXPECT_EQ(full_like(base, 4).to_vector<double>(), std::vector<double>(6, 4));
  // Non-contiguous `like`: a contiguous result of the same shape.
  Tensor z = zeros_like(base.t());
  EXPECT_EQ(z.sizes(), (IntList{3, 2}));
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_LOOM_ERROR(zeros_like(Tensor()), "_like", "undefined");
}

TEST(Factory, FromBlobAliasesAndCallsDeleter) {
  std::vector<float> data{1, 2, 3, 4, 5, 6};
  int deleted = 0;
  {
    Tensor t = from_blob(data.data(), {2, 3}, kFloat32, [&](void* p) {
      EXPECT_EQ(p, data.data());
      ++deleted;
    });
    EXPECT_EQ(t.data_ptr<float>(), data.data());  // no copy
    EXPECT_EQ(t.to_vector<float>(), data);
    data[4] = 50;
    EXPECT_EQ(t.to_vector<float>()[4], 50.0f);
    Tensor v = t.select(1, 1);  // a view keeps the memory alive
    t = Tensor();
    EXPECT_EQ(deleted, 0);
    EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{2, 50}));
  }
  EXPECT_EQ(deleted, 1);
  // Strided, without a deleter.
  Tensor cols = from_blob(data.data(), {3, 2}, {1, 3});
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{1, 4, 2, 50, 3, 6}));
  EXPECT_LOOM_ERROR(from_blob(nullptr, {2}), "from_blob", "null");
  EXPECT_LOOM_ERROR(from_blob(data.data(), {2}, {1, 1}), "from_blob", "1 sizes but 2 strides");
}

TEST(Factory, TensorFromValues) {
  Tensor t = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.sizes(), (IntList{2, 3}));
  EXPECT_FLOAT_EQ(t.select(1, 2).to_vector<float>()[1], 6.0f);
  EXPECT_EQ(tensor<int64_t>({1, 2, 3}).sizes(), (IntList{3}));
  EXPECT_EQ(tensor<double>({5}).dim(), 0);  // one value without sizes: a scalar
  Tensor converted = tensor<int64_t>(std::vector<int64_t>{1, 2}, {2}, kFloat64);
  EXPECT_EQ(converted.dtype(), kFloat64);
  EXPECT_EQ(tensor<bool>({true, false, true}).to_vector<bool>(),
            (std::vector<bool>{true, false, true}));
  EXPECT_LOOM_ERROR(tensor<float>({1, 2, 3}, {2, 2}), "tensor", "3 values",
                    "shape [2, 2] (4 elements)");
}

TEST(Factory, RequiresGradOnlyForFloatingDtypes) {
  Tensor f = zeros({2}, TensorOptions(kFloat64).requires_grad());
  EXPECT_TRUE(f.requires_grad());
  EXPECT_TRUE(f.is_leaf());
  EXPECT_TRUE(ones({2}).requires_grad_().requires_grad());
  EXPECT_LOOM_ERROR(zeros({2}, TensorOptions(kInt64).requires_grad()), "requires_grad_",
                    "only floating-point tensors can require gradients", "int64");
  EXPECT_LOOM_ERROR(arange(3).requires_grad_(), "requires_grad_", "floating-point");
  Tensor b = tensor<bool>({true});
  EXPECT_LOOM_ERROR(b.requires_grad_(), "floating-point", "bool");
  EXPECT_NO_THROW(arange(3).requires_grad_(false));
}

}  // namespace
}  // namespace loom
