// The argument checks gloo and nccl share (distributed/CollectiveChecks.h):
// host logic only, so every case runs without a GPU.  The nccl wording of the
// device check is tested here too, with CPU tensors.
#include <vector>

#include "distributed/CollectiveChecks.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using checks::Placement;

TEST(CollectiveChecks, TensorMustBeDefinedOnTheRightDeviceAndContiguous) {
  EXPECT_LOOM_ERROR(checks::check_tensor("ProcessGroupGloo", "all_reduce", Tensor(), "tensor",
                                         Placement::kCpuOnly),
                    "ProcessGroupGloo::all_reduce: tensor is an undefined tensor");
  Tensor t = zeros({2, 3});
  EXPECT_NO_THROW(checks::check_tensor("ProcessGroupGloo", "all_reduce", t, "tensor",
                                       Placement::kCpuOnly));
  EXPECT_NO_THROW(checks::check_tensor("ProcessGroupGloo", "all_reduce", t, "tensor",
                                       Placement::kCpuOrCuda));
  EXPECT_LOOM_ERROR(checks::check_tensor("ProcessGroupNccl", "broadcast", t, "tensor",
                                         Placement::kCudaOnly),
                    "ProcessGroupNccl::broadcast: tensor must be a CUDA tensor", "got one on cpu",
                    "gloo");
  EXPECT_LOOM_ERROR(checks::check_tensor("ProcessGroupGloo", "all_reduce", t.t(), "tensor",
                                         Placement::kCpuOnly),
                    "ProcessGroupGloo::all_reduce: tensor must be contiguous", "strides [1, 3]",
                    "t.contiguous()");
}

TEST(CollectiveChecks, RootCountSameAndDevice) {
  EXPECT_NO_THROW(checks::check_root("ProcessGroupNccl", "reduce", 1, 2));
  EXPECT_LOOM_ERROR(checks::check_root("ProcessGroupNccl", "reduce", 2, 2),
                    "ProcessGroupNccl::reduce: root must be in [0, 2), got 2");
  EXPECT_LOOM_ERROR(checks::check_root("ProcessGroupGloo", "gather", -1, 3),
                    "ProcessGroupGloo::gather: root must be in [0, 3), got -1");
  EXPECT_LOOM_ERROR(checks::check_count("ProcessGroupNccl", "all_gather", "outputs", 1, 2),
                    "ProcessGroupNccl::all_gather: expected 2 outputs (one per rank), got 1");
  Tensor a = zeros({4}), b = zeros({2, 3}), c = zeros({4}, kInt64);
  EXPECT_NO_THROW(checks::check_same("ProcessGroupGloo", "scatter", a, "inputs[0]", a, "output"));
  EXPECT_LOOM_ERROR(checks::check_same("ProcessGroupGloo", "scatter", b, "inputs[1]", a, "output"),
                    "ProcessGroupGloo::scatter: inputs[1] has 6 elements (shape [2, 3]) but "
                    "output has 4 (shape [4])");
  EXPECT_LOOM_ERROR(checks::check_same("ProcessGroupNccl", "gather", c, "outputs[0]", a, "input"),
                    "ProcessGroupNccl::gather: outputs[0] has dtype int64 but input has float32");
  EXPECT_NO_THROW(checks::check_same_device("ProcessGroupNccl", "gather", a, "outputs[0]", c,
                                            "input"));
  EXPECT_LOOM_ERROR(checks::check_same_device("ProcessGroupNccl", "gather", a.to(Device(kCPU, 1)),
                                              "outputs[1]", c, "input"),
                    "ProcessGroupNccl::gather: outputs[1] is on cpu:1 but input is on cpu",
                    "same device");
  EXPECT_EQ(checks::name_at("outputs", 3), "outputs[3]");
  EXPECT_EQ(checks::sizes_text({2, 3}), "[2, 3]");
}

TEST(CollectiveChecks, PeersAndTags) {
  EXPECT_NO_THROW(checks::check_peer("ProcessGroupNccl", "send", "dst", 1, 0, 2, 0));
  EXPECT_LOOM_ERROR(checks::check_peer("ProcessGroupNccl", "send", "dst", 0, 0, 2, 0),
                    "ProcessGroupNccl::send: dst must be another rank in [0, 2) than this rank "
                    "(0), got 0");
  EXPECT_LOOM_ERROR(checks::check_peer("ProcessGroupGloo", "recv", "src", 5, 0, 2, 0),
                    "ProcessGroupGloo::recv: src must be another rank", "got 5");
  EXPECT_LOOM_ERROR(checks::check_peer("ProcessGroupGloo", "recv", "src", 1, 0, 2, -3),
                    "ProcessGroupGloo::recv: tag must be >= 0, got -3");
}

TEST(CollectiveChecks, AllGatherIntoTensor) {
  EXPECT_NO_THROW(checks::check_all_gather_into_tensor("ProcessGroupNccl", zeros({6}), zeros({3}), 2));
  EXPECT_LOOM_ERROR(
      checks::check_all_gather_into_tensor("ProcessGroupNccl", zeros({5}), zeros({3}), 2),
      "ProcessGroupNccl::all_gather_into_tensor: output must hold size() * input.numel() = 2 * 3 "
      "= 6 elements, got 5 (shape [5])");
  EXPECT_LOOM_ERROR(checks::check_all_gather_into_tensor("ProcessGroupGloo", zeros({6}, kInt64),
                                                         zeros({3}), 2),
                    "ProcessGroupGloo::all_gather_into_tensor: output has dtype int64 but input "
                    "has float32");
}

TEST(CollectiveChecks, ReduceOpPerDType) {
  for (DType d : {kFloat32, kFloat64})
    EXPECT_NO_THROW(checks::check_reduce_op("ProcessGroupNccl", ReduceOp::Avg, d));
  for (DType d : {kInt64, kInt32, kUInt8, kBool})
    EXPECT_LOOM_ERROR(checks::check_reduce_op("ProcessGroupNccl", ReduceOp::Avg, d),
                      "ProcessGroupNccl: reduce op avg needs a floating-point tensor",
                      dtype_name(d));
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max})
    for (DType d : {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool})
      EXPECT_NO_THROW(checks::check_reduce_op("ProcessGroupGloo", op, d));
}

}  // namespace
}  // namespace distributed
}  // namespace loom
