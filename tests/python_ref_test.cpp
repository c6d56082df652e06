// The comparison the PyTorch parity tests rely on (tests/PythonRef.h) must
// reject a result of the wrong shape: an empty tensor used to pass because
// only the common prefix of the two tensors was compared.
#include <gtest/gtest-spi.h>

#include <cmath>

#include "tests/PythonRef.h"

namespace loom {
namespace {

using testing::relative_error;
using testing::RelativeErrorAtMost;

TEST(RelativeError, ScaleFreeOnMatchingShapes) {
  const Tensor ref = tensor<double>({1, -4, 2, 0}, {2, 2});
  EXPECT_EQ(relative_error(ref, ref), 0.0);
  // Largest difference 0.2 over the reference's largest magnitude 4.
  EXPECT_DOUBLE_EQ(relative_error(tensor<double>({1.2, -4, 2, 0.1}, {2, 2}), ref), 0.05);
  // Scale-free: multiplying both by 1000 changes nothing.
  EXPECT_DOUBLE_EQ(relative_error(tensor<double>({1200, -4000, 2000, 100}, {2, 2}), ref * 1000.0),
                   0.05);
  // An all-zero reference is measured against the floor.
  EXPECT_DOUBLE_EQ(relative_error(tensor<double>({1e-7}), tensor<double>({0.0}), 1e-6), 0.1);
  EXPECT_TRUE(RelativeErrorAtMost(tensor<double>({1.2, -4, 2, 0.1}, {2, 2}), ref, 0.05));
  EXPECT_FALSE(RelativeErrorAtMost(tensor<double>({1.2, -4, 2, 0.1}, {2, 2}), ref, 0.04));
}

TEST(RelativeError, EmptyResultIsAShapeMismatch) {
  const Tensor ref = tensor<float>({1, 2, 3, 4});
  const Tensor empty_result = zeros({0});
  EXPECT_LOOM_ERROR(relative_error(empty_result, ref), "result has shape [0]",
                    "reference has shape [4]");
  const ::testing::AssertionResult r = RelativeErrorAtMost(empty_result, ref, 1e-4);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("shape [0] vs reference shape [4]"));
}

TEST(RelativeError, SameElementsDifferentShapeIsAMismatch) {
  // Equal values in a (2, 3) against a (3, 2) or a (6): still wrong.
  const Tensor ref = arange(6, kFloat32).reshape({3, 2});
  EXPECT_LOOM_ERROR(relative_error(ref.reshape({2, 3}), ref), "[2, 3]", "[3, 2]");
  EXPECT_LOOM_ERROR(relative_error(ref.reshape({6}), ref), "[6]", "[3, 2]");
  // A 0-dim loss against a (1) reference is a different shape as well.
  EXPECT_FALSE(RelativeErrorAtMost(scalar_tensor(1.0, kFloat32), tensor<float>({1.0f}, {1}), 1e-4));
  EXPECT_LOOM_ERROR(relative_error(Tensor(), ref), "result is undefined");
}

// The way torch_parity.cpp uses it: the expectation fails, naming both shapes,
// instead of passing on an empty logits tensor.
TEST(RelativeError, ParityExpectationFailsOnShapeMismatch) {
  const Tensor logits = zeros({0, 10});
  const Tensor want = randn({4, 10});
  EXPECT_NONFATAL_FAILURE(EXPECT_TRUE(RelativeErrorAtMost(logits, want, 1e-4)) << "logits",
                          "shape [0, 10] vs reference shape [4, 10]");
  EXPECT_NONFATAL_FAILURE(EXPECT_TRUE(RelativeErrorAtMost(want.narrow(0, 0, 3), want, 1e-4)),
                          "shape [3, 10] vs reference shape [4, 10]");
}

TEST(RelativeError, NanOrInfinityInTheResultFails) {
  const Tensor ref = tensor<double>({1, 2, 3});
  EXPECT_TRUE(std::isinf(relative_error(tensor<double>({1, NAN, 3}), ref)));
  EXPECT_TRUE(std::isinf(relative_error(tensor<double>({1, INFINITY, 3}), ref)));
  const auto r = RelativeErrorAtMost(tensor<double>({1, NAN, 3}), ref, 1e-4);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("flat index 1"));
  // Agreement on NaN and on infinities is agreement.
  const Tensor odd = tensor<double>({NAN, INFINITY, -2});
  EXPECT_EQ(relative_error(odd, odd), 0.0);
  EXPECT_TRUE(std::isinf(relative_error(tensor<double>({NAN, -INFINITY, -2}), odd)));
}

}  // namespace
}  // namespace loom
