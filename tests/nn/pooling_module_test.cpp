// nn::AvgPool2d and nn::AdaptiveAvgPool2d as modules: every option reaches
// the op (outputs and input gradients equal torch.nn's, PyTorch 1.13 run
// live), defaults follow PyTorch (stride = kernel_size), gradients pass
// gradcheck, and the modules hold no state.
#include <sstream>

#include "tests/nn/TorchModuleRef.h"

namespace loom {
namespace {

using testing::AllClose;
using testing::GradOk;

Tensor input(IntList sizes, uint64_t seed, DType dtype = kFloat32) {
  Generator gen(seed);
  return randn(std::move(sizes), dtype, &gen);
}

std::string printed(const nn::Module& m) {
  std::ostringstream out;
  out << m;
  return out.str();
}

TEST(AvgPool2dModule, OptionsMatchTorch) {
  testing::TorchModuleCases cases;
  cases.add("kernel2", nn::AvgPool2d(nn::AvgPool2dOptions(2)), "nn.AvgPool2d(2)",
            input({2, 3, 8, 8}, 1));
  cases.add("odd_size_floor", nn::AvgPool2d(nn::AvgPool2dOptions(2)), "nn.AvgPool2d(2)",
            input({1, 2, 7, 5}, 2));
  cases.add("pad_include", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)),
            "nn.AvgPool2d(3, stride=2, padding=1)", input({2, 2, 9, 9}, 3));
  cases.add("pad_exclude",
            nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1).count_include_pad(false)),
            "nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)", input({2, 2, 9, 9}, 3));
  cases.add("ceil_include", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1).ceil_mode(true)),
            "nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)", input({1, 3, 8, 10}, 4));
  cases.add("ceil_exclude",
            nn::AvgPool2d(
                nn::AvgPool2dOptions(3).stride(2).padding(1).ceil_mode(true).count_include_pad(false)),
            "nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)",
            input({1, 3, 8, 10}, 4));
  cases.add("rect_float64", nn::AvgPool2d(nn::AvgPool2dOptions({2, 3}).stride({1, 2}).padding({1, 0})),
            "nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 0))", input({2, 2, 6, 7}, 5, kFloat64));
  cases.add("unbatched", nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(1)), "nn.AvgPool2d(2, stride=1)",
            input({3, 5, 6}, 6));
  cases.add("non_contiguous", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2)),
            "nn.AvgPool2d(3, stride=2)", input({2, 3, 9, 11}, 7).transpose(2, 3));
  cases.check(1e-5);
}

TEST(AvgPool2dModule, StrideDefaultsToKernelSize) {
  nn::AvgPool2d pool(nn::AvgPool2dOptions({2, 3}));
  EXPECT_EQ(pool->options.stride_.vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(pool->options.padding_.vec(), (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(pool->options.ceil_mode_);
  EXPECT_TRUE(pool->options.count_include_pad_);
  // 2x3 windows tiling a 4x6 plane: each output is its window's mean.
  const Tensor x = arange(24, kFloat32).reshape({1, 1, 4, 6});
  EXPECT_EQ(pool(x).to_vector<float>(), (std::vector<float>{4, 7, 16, 19}));
  EXPECT_EQ(printed(*pool), "AvgPool2d(kernel_size=[2, 3], stride=[2, 3], padding=[0, 0])");
}

TEST(AvgPool2dModule, GradcheckAndStatelessness) {
  nn::AvgPool2d pool(nn::AvgPool2dOptions(3).stride(2).padding(1).ceil_mode(true).count_include_pad(false));
  Tensor x = testing::random_leaf({2, 2, 6, 5}, 8);
  EXPECT_TRUE(GradOk([&](const std::vector<Tensor>& v) { return pool(v[0]); }, {x}));
  EXPECT_TRUE(pool->parameters().empty());
  EXPECT_TRUE(pool->named_buffers().empty());
  EXPECT_TRUE(pool->state_dict().empty());
  // Train and eval compute the same thing; a clone too; any CPU device works.
  const Tensor y = pool(x.detach());
  pool->eval();
  EXPECT_TRUE(AllClose(pool(x.detach()), y, 0, 0));
  auto copy = std::dynamic_pointer_cast<nn::AvgPool2dImpl>(pool->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(AllClose(copy->forward(x.detach()), y, 0, 0));
  const Tensor on1 = pool(x.detach().to(Device("cpu:1")));
  EXPECT_EQ(on1.device(), Device("cpu:1"));
  EXPECT_TRUE(AllClose(on1.to(Device("cpu")), y, 0, 0));
}

TEST(AvgPool2dModule, BadInputsThrow) {
  nn::AvgPool2d pool(nn::AvgPool2dOptions(3));
  EXPECT_LOOM_ERROR(pool(zeros({1, 1, 2, 2})), "avg_pool2d", "[1, 1, 2, 2]");
  EXPECT_LOOM_ERROR(pool(zeros({5, 5})), "avg_pool2d", "[5, 5]");
  nn::AvgPool2d wide_pad(nn::AvgPool2dOptions(2).padding(2));
  EXPECT_LOOM_ERROR(wide_pad(zeros({1, 1, 6, 6})), "avg_pool2d", "pad");
  EXPECT_LOOM_ERROR(nn::AvgPool2dOptions({2, 2, 2}), "expected 2 values, got 3");
}

TEST(AdaptiveAvgPool2dModule, OutputSizesMatchTorch) {
  testing::TorchModuleCases cases;
  cases.add("global", nn::AdaptiveAvgPool2d(1), "nn.AdaptiveAvgPool2d(1)", input({2, 4, 7, 7}, 11));
  cases.add("divisible_float64", nn::AdaptiveAvgPool2d(IntList{2, 3}), "nn.AdaptiveAvgPool2d((2, 3))",
            input({2, 3, 4, 6}, 12, kFloat64));
  cases.add("non_divisible", nn::AdaptiveAvgPool2d(IntList{3, 4}), "nn.AdaptiveAvgPool2d((3, 4))",
            input({2, 2, 7, 9}, 13));
  cases.add("larger_than_input", nn::AdaptiveAvgPool2d(IntList{7, 8}), "nn.AdaptiveAvgPool2d((7, 8))",
            input({1, 2, 5, 5}, 14));
  cases.add("row", nn::AdaptiveAvgPool2d(IntList{1, 5}), "nn.AdaptiveAvgPool2d((1, 5))",
            input({2, 3, 6, 11}, 15));
  cases.add("unbatched", nn::AdaptiveAvgPool2d(3), "nn.AdaptiveAvgPool2d(3)", input({4, 8, 8}, 16));
  cases.add("non_contiguous", nn::AdaptiveAvgPool2d(IntList{2, 3}), "nn.AdaptiveAvgPool2d((2, 3))",
            input({2, 3, 9, 10}, 17).transpose(2, 3));
  cases.check(1e-5);
}

TEST(AdaptiveAvgPool2dModule, GlobalPoolIsThePlaneMean) {
  nn::AdaptiveAvgPool2d pool(1);
  EXPECT_EQ(pool->output_size.vec(), (std::vector<int64_t>{1, 1}));
  const Tensor x = input({3, 5, 6, 4}, 18, kFloat64);
  const Tensor y = pool(x);
  EXPECT_EQ(y.sizes(), (IntList{3, 5, 1, 1}));
  EXPECT_TRUE(AllClose(y.reshape({3, 5}), x.mean({2, 3}), 1e-12, 1e-14));
  EXPECT_EQ(printed(*pool), "AdaptiveAvgPool2d(output_size=[1, 1])");
  EXPECT_TRUE(pool->parameters().empty());
  EXPECT_TRUE(pool->state_dict().empty());
}

TEST(AdaptiveAvgPool2dModule, GradcheckAndErrors) {
  nn::AdaptiveAvgPool2d pool(IntList{3, 2});
  Tensor x = testing::random_leaf({2, 2, 5, 7}, 19);
  EXPECT_TRUE(GradOk([&](const std::vector<Tensor>& v) { return pool(v[0]); }, {x}));
  nn::AdaptiveAvgPool2d bad(IntList{-1, 2});
  EXPECT_LOOM_ERROR(bad(zeros({1, 1, 4, 4})), "adaptive_avg_pool2d", "output_size");
  EXPECT_LOOM_ERROR(pool(zeros({4, 4})), "adaptive_avg_pool2d", "[4, 4]");
}

}  // namespace
}  // namespace loom
