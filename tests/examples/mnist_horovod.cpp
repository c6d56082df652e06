// The Horovod-style MNIST trainer end to end, through the loomrun binary
// with horovodrun's -np: 2 ranks train one epoch on part of the data, only
// rank 0 prints and saves, and its checkpoint loads strictly into a fresh
// ConvNet; a bad flag on the workers fails the job with the workers' error.
#include <regex>

#include "tests/examples/Launch.h"

namespace loom {
namespace {

using testing::Launch;
using testing::lines_of;

const char* kLoomrun = "distributed/launch/loomrun";
const char* kTrainer = "examples/mnist/train_horovod";

std::string mnist_dir() {
  const char* env = std::getenv("LOOM_MNIST_DIR");
  return env && *env ? env : testing::source_root() + "/data/mnist";
}

class MnistHorovod : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = mnist_dir();
    ASSERT_TRUE(::access((data_ + "/t10k-labels-idx1-ubyte").c_str(), R_OK) == 0 ||
                ::access((data_ + "/t10k-labels-idx1-ubyte.gz").c_str(), R_OK) == 0)
        << "no MNIST data in " << data_ << "; run tools/setup.sh (or set LOOM_MNIST_DIR)";
    dir_ = testing::make_temp_dir();
  }

  std::vector<std::string> command(std::vector<std::string> launcher, const std::vector<std::string>& trainer) {
    std::vector<std::string> args = {kLoomrun};
    args.insert(args.end(), launcher.begin(), launcher.end());
    args.push_back(kTrainer);
    args.push_back("--data-dir");
    args.push_back(data_);
    args.insert(args.end(), trainer.begin(), trainer.end());
    return args;
  }

  std::string data_, dir_;
};

std::vector<std::string> lines_of_rank(const std::string& text, int rank) {
  const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
  std::vector<std::string> out;
  for (const auto& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  return out;
}

TEST_F(MnistHorovod, TwoRanksWithNpTrainAndRankZeroSavesALoadableCheckpoint) {
  const std::string model = dir_ + "/mnist_horovod.safetensors";
  Launch l(command({"-np", "2", "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "1", "--limit-train", "4000", "--save", model, "--timeout-s", "60"}));
  ASSERT_TRUE(l.wait(150)) << l.log();
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  const std::string out = l.out();
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: loom MNIST Horovod-style: 2 ranks (2 on this machine)"));
  EXPECT_THAT(out, ::testing::HasSubstr("lr 0.02 (0.01 x 2 ranks)"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("\\[rank0\\]: Test set: Average loss: ([0-9.]+), Accuracy: "
                                                   "([0-9.]+)%")))
      << out;
  EXPECT_GE(std::stod(m[2]), 80.0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: Training complete in: "));
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: Saved model to " + model));
  EXPECT_TRUE(lines_of_rank(out, 1).empty()) << out;
  for (const auto& line : lines_of(out)) EXPECT_EQ(line.rfind("[rank0]: ", 0), 0u) << line;

  nn::models::ConvNet fresh;
  ASSERT_NO_THROW(nn::load_into(*fresh, model, /*strict=*/true));
  nn::Metadata meta;
  nn::load(model, &meta);
  EXPECT_EQ(meta["world_size"], "2");
}

TEST_F(MnistHorovod, AFailingRankEndsTheJobWithItsError) {
  Launch l(command({"-np", "2", "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "1", "--device", "gpu:7", "--timeout-s", "20"}));
  ASSERT_TRUE(l.wait(60)) << l.log();
  EXPECT_NE(l.exit_code(), 0) << l.log();
  EXPECT_THAT(l.err(), ::testing::HasSubstr("error on rank")) << l.log();
}

}  // namespace
}  // namespace loom
