// What gloo and nccl share for the collectives over lists of tensors
// (distributed/GatherScatter.h): the argument checks and back_to_back.  Host
// logic only, so every case runs without a GPU (nccl's placement is tested
// through its refusal of CPU tensors).
#include <vector>

#include "distributed/GatherScatter.h"
#include "tensor/Factory.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using checks::Placement;
constexpr Placement kCpu = Placement::kCpuOnly;

TEST(GatherScatterChecks, GatherChecksTheOutputsOnTheRootOnly) {
  const Tensor input = zeros({3});
  std::vector<Tensor> outputs{zeros({3}), zeros({3})};
  EXPECT_NO_THROW(checks::check_gather("ProcessGroupGloo", outputs, input, 0, 0, 2, kCpu));
  std::vector<Tensor> none;
  EXPECT_NO_THROW(checks::check_gather("ProcessGroupGloo", none, input, 0, 1, 2, kCpu));
  EXPECT_LOOM_ERROR(checks::check_gather("ProcessGroupGloo", none, input, 0, 0, 2, kCpu),
                    "ProcessGroupGloo::gather: expected 2 outputs on the root (one per rank), "
                    "got 0");
  std::vector<Tensor> short_one{zeros({3}), zeros({2})};
  EXPECT_LOOM_ERROR(checks::check_gather("ProcessGroupGloo", short_one, input, 1, 1, 2, kCpu),
                    "ProcessGroupGloo::gather: outputs[1] has 2 elements (shape [2]) but input "
                    "has 3 (shape [3])");
  EXPECT_LOOM_ERROR(checks::check_gather("ProcessGroupGloo", outputs, input, 2, 0, 2, kCpu),
                    "ProcessGroupGloo::gather: root must be in [0, 2), got 2");
  EXPECT_LOOM_ERROR(checks::check_gather("ProcessGroupGloo", outputs, Tensor(), 0, 0, 2, kCpu),
                    "ProcessGroupGloo::gather: input is an undefined tensor");
}

TEST(GatherScatterChecks, ScatterChecksTheInputsOnTheRootOnly) {
  const Tensor output = zeros({2, 2});
  std::vector<Tensor> inputs{zeros({4}), zeros({4}, kInt64)};
  EXPECT_NO_THROW(checks::check_scatter("ProcessGroupGloo", output, inputs, 1, 0, 2, kCpu));
  EXPECT_LOOM_ERROR(checks::check_scatter("ProcessGroupGloo", output, inputs, 1, 1, 2, kCpu),
                    "ProcessGroupGloo::scatter: inputs[1] has dtype int64 but output has "
                    "float32");
  std::vector<Tensor> three{zeros({4}), zeros({4}), zeros({4})};
  EXPECT_LOOM_ERROR(checks::check_scatter("ProcessGroupGloo", output, three, 0, 0, 2, kCpu),
                    "ProcessGroupGloo::scatter: expected 2 inputs on the root (one per rank), "
                    "got 3");
}

TEST(GatherScatterChecks, AllGatherAndReduceScatterCheckEveryTensor) {
  const Tensor t = zeros({2, 3});
  std::vector<Tensor> like{zeros({6}), zeros({3, 2})};
  EXPECT_NO_THROW(checks::check_all_gather("ProcessGroupGloo", like, t, 2, kCpu));
  EXPECT_NO_THROW(checks::check_reduce_scatter("ProcessGroupGloo", t, like, 2, kCpu));
  std::vector<Tensor> strided{t.t(), zeros({6})};
  EXPECT_LOOM_ERROR(checks::check_all_gather("ProcessGroupGloo", strided, t, 2, kCpu),
                    "ProcessGroupGloo::all_gather: outputs[0] must be contiguous");
  EXPECT_LOOM_ERROR(checks::check_reduce_scatter("ProcessGroupGloo", t, like, 3, kCpu),
                    "ProcessGroupGloo::reduce_scatter: expected 3 inputs (one per rank), got 2");
  EXPECT_LOOM_ERROR(
      checks::check_all_gather("ProcessGroupNccl", like, t, 2, Placement::kCudaOnly),
      "ProcessGroupNccl::all_gather: input must be a CUDA tensor");
}

TEST(GatherScatterChecks, AllToAll) {
  std::vector<Tensor> ins{zeros({2}), zeros({3})}, outs{zeros({2}), zeros({1})};
  EXPECT_NO_THROW(checks::check_all_to_all("ProcessGroupNccl", outs, ins, 0, 2, kCpu));
  EXPECT_LOOM_ERROR(checks::check_all_to_all("ProcessGroupNccl", outs, ins, 1, 2, kCpu),
                    "ProcessGroupNccl::all_to_all: outputs[1] receives this rank's own inputs[1]",
                    "got 1 and 3");
  std::vector<Tensor> mixed{zeros({2}), zeros({2}, kInt32)};
  EXPECT_LOOM_ERROR(checks::check_all_to_all("ProcessGroupGloo", outs, mixed, 0, 2, kCpu),
                    "ProcessGroupGloo::all_to_all: every input and output must have the dtype of "
                    "inputs[0] (float32); inputs[1] is int32");
  std::vector<Tensor> one{zeros({2})};
  EXPECT_LOOM_ERROR(checks::check_all_to_all("ProcessGroupGloo", one, ins, 0, 2, kCpu),
                    "ProcessGroupGloo::all_to_all: expected 2 outputs (one per rank), got 1");
  EXPECT_LOOM_ERROR(
      checks::check_all_to_all("ProcessGroupNccl", outs, ins, 0, 2, Placement::kCudaOnly),
      "ProcessGroupNccl::all_to_all: inputs[0] must be a CUDA tensor");
}

TEST(BackToBack, FindsOneBufferOnlyWhenTheTensorsFollowEachOther) {
  const Tensor flat = zeros({7});
  char* base = static_cast<char*>(flat.data_ptr());
  EXPECT_EQ(back_to_back({flat.narrow(0, 0, 2), flat.narrow(0, 2, 3), flat.narrow(0, 5, 2)}),
            base);
  EXPECT_EQ(back_to_back({flat.narrow(0, 2, 3), flat.narrow(0, 5, 2)}), base + 2 * sizeof(float));
  EXPECT_EQ(back_to_back({flat}), base);
  // A gap, the wrong order, an empty tensor, an empty list.
  EXPECT_EQ(back_to_back({flat.narrow(0, 0, 2), flat.narrow(0, 3, 2)}), nullptr);
  EXPECT_EQ(back_to_back({flat.narrow(0, 2, 2), flat.narrow(0, 0, 2)}), nullptr);
  EXPECT_EQ(back_to_back({flat.narrow(0, 0, 2), flat.narrow(0, 2, 0), flat.narrow(0, 2, 2)}),
            nullptr);
  EXPECT_EQ(back_to_back({}), nullptr);
}

}  // namespace
}  // namespace distributed
}  // namespace loom
