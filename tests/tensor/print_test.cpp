// operator<< prints like PyTorch: aligned values, nested brackets,
// summarised large tensors, then dtype, shape and device.
#include <cmath>
#include <iomanip>
#include <sstream>

#include "tests/TestUtil.h"

namespace loom {
namespace {

std::string str(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

TEST(Print, FloatMatrix) {
  EXPECT_EQ(str(tensor<float>({1, 2.5f, 3, 4}, {2, 2})),
            "tensor([[1.0000, 2.5000],\n"
            "        [3.0000, 4.0000]])\n"
            "[ float32 [2, 2] on cpu ]");
}

TEST(Print, IntegersBoolsAndAlignment) {
  EXPECT_EQ(str(tensor<int64_t>({1, -2, 10})), "tensor([ 1, -2, 10])\n[ int64 [3] on cpu ]");
  EXPECT_EQ(str(tensor<bool>({true, false})), "tensor([ True, False])\n[ bool [2] on cpu ]");
  EXPECT_EQ(str(tensor<uint8_t>({7, 255})), "tensor([  7, 255])\n[ uint8 [2] on cpu ]");
  EXPECT_EQ(str(tensor<double>({-1.5, 10})),
            "tensor([-1.5000, 10.0000])\n[ float64 [2] on cpu ]");
}

TEST(Print, ScalarsEmptyAndUndefined) {
  EXPECT_EQ(str(scalar_tensor(3.5)), "tensor(3.5000)\n[ float32 [] on cpu ]");
  EXPECT_EQ(str(zeros({0})), "tensor([])\n[ float32 [0] on cpu ]");
  EXPECT_EQ(str(zeros({2, 0}, kInt64)), "tensor([])\n[ int64 [2, 0] on cpu ]");
  EXPECT_EQ(str(Tensor()), "[ undefined tensor ]");
}

TEST(Print, ThreeDimsSeparateBlocksWithABlankLine) {
  EXPECT_EQ(str(arange(8).view({2, 2, 2})),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]])\n"
            "[ int64 [2, 2, 2] on cpu ]");
}

TEST(Print, NonContiguousAndOtherDevice) {
  Tensor t = arange(6, TensorOptions(kFloat64).device(Device("cpu:1"))).view({2, 3}).t();
  EXPECT_EQ(str(t),
            "tensor([[0.0000, 3.0000],\n"
            "        [1.0000, 4.0000],\n"
            "        [2.0000, 5.0000]])\n"
            "[ float64 [3, 2] on cpu:1 ]");
}

TEST(Print, ScientificNanAndInf) {
  EXPECT_EQ(str(tensor<float>({1e-5f, 1.0f})),
            "tensor([1.0000e-05, 1.0000e+00])\n[ float32 [2] on cpu ]");
  EXPECT_EQ(str(tensor<float>({NAN, INFINITY, -1.5f})),
            "tensor([    nan,     inf, -1.5000])\n[ float32 [3] on cpu ]");
}

TEST(Print, SummarisesLargeTensors) {
  EXPECT_EQ(str(arange(2000)),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])\n[ int64 [2000] on cpu ]");
  const std::string m = str(arange(1100).view({100, 11}));
  EXPECT_EQ(m,
            "tensor([[   0,    1,    2,  ...,    8,    9,   10],\n"
            "        [  11,   12,   13,  ...,   19,   20,   21],\n"
            "        [  22,   23,   24,  ...,   30,   31,   32],\n"
            "        ...,\n"
            "        [1067, 1068, 1069,  ..., 1075, 1076, 1077],\n"
            "        [1078, 1079, 1080,  ..., 1086, 1087, 1088],\n"
            "        [1089, 1090, 1091,  ..., 1097, 1098, 1099]])\n"
            "[ int64 [100, 11] on cpu ]");
  // Exactly 1000 elements are printed in full.
  EXPECT_EQ(str(arange(1000)).find("..."), std::string::npos);
}

TEST(Print, LongRowsWrapAt80Columns) {
  const std::string s = str(arange(30, kFloat32));
  std::istringstream lines(s);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 80u) << line;
    ++count;
  }
  EXPECT_GT(count, 3);  // wrapped rows plus the description line
  EXPECT_NE(s.find("tensor([ 0.0000,  1.0000,"), std::string::npos) << s;
  EXPECT_NE(s.find(",\n        "), std::string::npos) << s;
}

TEST(Print, GradFnAndRequiresGrad) {
  Tensor a = tensor<float>({1, 2}).requires_grad_();
  EXPECT_EQ(str(a), "tensor([1.0000, 2.0000], requires_grad=True)\n[ float32 [2] on cpu ]");
  EXPECT_EQ(str(a * 2.0f),
            "tensor([2.0000, 4.0000], grad_fn=<MulBackward>)\n[ float32 [2] on cpu ]");
  EXPECT_NE(str(a.view({2, 1})).find("grad_fn=<ViewBackward>"), std::string::npos);
  // The stream's own formatting flags do not leak into the values.
  std::ostringstream out;
  out << std::scientific << std::setprecision(1) << tensor<float>({0.5f, 1});
  EXPECT_EQ(out.str(), "tensor([0.5000, 1.0000])\n[ float32 [2] on cpu ]");
}

}  // namespace
}  // namespace loom
