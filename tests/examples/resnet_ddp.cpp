// The ResNet-18 trainers end to end on small synthetic images: one process,
// and two DDP ranks through loomrun with and without SyncBatchNorm; only
// rank 0 prints, and it reports the images per second of both ranks.
#include <regex>

#include "tests/examples/Launch.h"

namespace loom {
namespace {

using testing::Launch;
using testing::lines_of;

const char* kLoomrun = "distributed/launch/loomrun";

// images/s (and the per-rank figure under DDP) from an epoch line.
bool throughput(const std::string& out, double& total, double& per_rank) {
  std::smatch m;
  const std::regex re("epoch 1/1: 3 steps in [^,]*, loss [0-9.]+, ([0-9.]+) images/s(?: \\(2 ranks x ([0-9.]+)\\))?");
  if (!std::regex_search(out, m, re)) return false;
  total = std::stod(m[1]);
  per_rank = m[2].matched ? std::stod(m[2]) : total;
  return true;
}

TEST(ResnetExamples, SingleProcessTrainsAndReportsImagesPerSecond) {
  Launch l({"examples/resnet/train", "--image-size", "32", "--batch-size", "4", "--steps", "3"});
  ASSERT_TRUE(l.wait(120)) << l.log();
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  double total = 0, per_rank = 0;
  ASSERT_TRUE(throughput(l.out(), total, per_rank)) << l.log();
  EXPECT_GT(total, 0);
  EXPECT_THAT(l.out(), ::testing::HasSubstr("3x32x32 images, 9 classes"));
  EXPECT_THAT(l.out(), ::testing::HasSubstr("Training complete in: "));
}

// --amp bf16 at O1 and O2 (bfloat16 weights, float32 batch norm and
// masters): the run says which, trains 3 steps and reports a finite loss.
TEST(ResnetExamples, SingleProcessTrainsInMixedPrecision) {
  for (const std::string level : {"O1", "O2"}) {
    Launch l({"examples/resnet/train", "--image-size", "32", "--batch-size", "4", "--steps", "3", "--amp",
              "bf16", "--opt-level", level});
    ASSERT_TRUE(l.wait(120)) << l.log();
    ASSERT_EQ(l.exit_code(), 0) << l.log();
    EXPECT_THAT(l.out(), ::testing::HasSubstr("mixed precision bfloat16 " + level)) << l.log();
    double total = 0, per_rank = 0;
    ASSERT_TRUE(throughput(l.out(), total, per_rank)) << l.log();
  }
  Launch bad({"examples/resnet/train", "--amp", "fp8"});
  ASSERT_TRUE(bad.wait(60)) << bad.log();
  EXPECT_NE(bad.exit_code(), 0);
  EXPECT_THAT(bad.err(), ::testing::HasSubstr("--amp"));
}

TEST(ResnetExamples, DdpRanksTrainInMixedPrecision) {
  Launch l({kLoomrun, "--nproc_per_node=2", "--master_port=" + std::to_string(testing::free_port()),
            "examples/resnet/train_ddp", "--image-size", "32", "--batch-size", "4", "--steps", "3", "--timeout-s",
            "60", "--amp", "bf16", "--opt-level", "O2"});
  ASSERT_TRUE(l.wait(150)) << l.log();
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  EXPECT_THAT(l.out(), ::testing::HasSubstr("mixed precision bfloat16 O2")) << l.log();
  double total = 0, per_rank = 0;
  ASSERT_TRUE(throughput(l.out(), total, per_rank)) << l.out();
}

void expect_ddp_run(bool sync_bn) {
  std::vector<std::string> args = {kLoomrun, "--nproc_per_node=2", "--master_port=" + std::to_string(testing::free_port()),
                                   "examples/resnet/train_ddp", "--image-size", "32", "--batch-size", "4", "--steps",
                                   "3", "--timeout-s", "60"};
  if (sync_bn) args.push_back("--sync-bn");
  Launch l(args);
  ASSERT_TRUE(l.wait(150)) << l.log();
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  const std::string out = l.out();
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: loom ResNet-18 DDP: 2 ranks (gloo)"));
  EXPECT_THAT(out, ::testing::HasSubstr("batch 4 per rank (8 per step), " +
                                        std::string(sync_bn ? "SyncBatchNorm" : "BatchNorm per rank")));
  double total = 0, per_rank = 0;
  ASSERT_TRUE(throughput(out, total, per_rank)) << out;
  EXPECT_GT(per_rank, 0);
  EXPECT_NEAR(total, 2 * per_rank, 0.2) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: Training complete in: "));
  for (const auto& line : lines_of(out)) EXPECT_EQ(line.rfind("[rank0]: ", 0), 0u) << line;
  for (const auto& line : lines_of(l.err())) EXPECT_EQ(line.rfind("[rank1]", 0), std::string::npos) << line;
}

TEST(ResnetExamples, TwoDdpRanksTrainWithSyncBatchNorm) { expect_ddp_run(/*sync_bn=*/true); }

TEST(ResnetExamples, TwoDdpRanksTrainWithLocalBatchNorm) { expect_ddp_run(/*sync_bn=*/false); }

TEST(ResnetExamples, BadFlagsFailClearly) {
  Launch small({"examples/resnet/train", "--image-size", "16"});
  ASSERT_TRUE(small.wait(20)) << small.log();
  EXPECT_EQ(small.exit_code(), 1) << small.log();
  EXPECT_THAT(small.err(), ::testing::HasSubstr("--image-size must be at least 32")) << small.log();
  Launch steps({"examples/resnet/train_ddp", "--steps", "-1"});
  ASSERT_TRUE(steps.wait(20)) << steps.log();
  EXPECT_NE(steps.exit_code(), 0) << steps.log();
  EXPECT_THAT(steps.err(), ::testing::HasSubstr("--steps")) << steps.log();
}

}  // namespace
}  // namespace loom
