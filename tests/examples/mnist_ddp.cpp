// The DDP MNIST trainer end to end, through the loomrun binary:
//   - 2 ranks train one epoch to >= 90% on the whole test split, only rank 0
//     prints, and rank 0's checkpoint loads strictly into a fresh ConvNet;
//   - two "nodes" (two loomruns, one rank each) train together, and one node
//     alone gives up after --timeout-s saying what it waited for;
//   - faults end the job instead of hanging it: a worker killed with SIGKILL,
//     a rank that skips a step's gradient all-reduce, a rank that stalls.
#include <regex>

#include "tensor/CudaRuntime.h"
#include "tests/examples/Launch.h"

namespace loom {
namespace {

using testing::Launch;
using testing::lines_of;

const char* kLoomrun = "distributed/launch/loomrun";
const char* kTrainer = "examples/mnist/train_ddp";

std::string mnist_dir() {
  const char* env = std::getenv("LOOM_MNIST_DIR");
  return env && *env ? env : testing::source_root() + "/data/mnist";
}

class MnistDdp : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = mnist_dir();
    ASSERT_TRUE(::access((data_ + "/t10k-labels-idx1-ubyte").c_str(), R_OK) == 0 ||
                ::access((data_ + "/t10k-labels-idx1-ubyte.gz").c_str(), R_OK) == 0)
        << "no MNIST data in " << data_ << "; run tools/setup.sh (or set LOOM_MNIST_DIR)";
    dir_ = testing::make_temp_dir();
  }

  // loomrun <launcher flags> train_ddp --data-dir ... <trainer flags>
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

// Lines of `text` that start with "[rankN]: ".
std::vector<std::string> lines_of_rank(const std::string& text, int rank) {
  const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
  std::vector<std::string> out;
  for (const auto& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  return out;
}

double accuracy_of(const std::string& out, const std::string& epoch) {
  std::smatch m;
  const std::regex re("\\[rank0\\]: epoch " + epoch + " done in [^:]*: test accuracy ([0-9.]+)% \\(2000 images, 2 ranks\\)");
  return std::regex_search(out, m, re) ? std::stod(m[1]) : -1;
}

TEST_F(MnistDdp, TwoRanksTrainAndRankZeroSavesALoadableCheckpoint) {
  const std::string model = dir_ + "/mnist_ddp.safetensors";
  Launch l(command({"--nproc_per_node=2", "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "1", "--save", model, "--timeout-s", "60"}));
  ASSERT_TRUE(l.wait(150)) << l.log();
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  const std::string out = l.out();
  const double accuracy = accuracy_of(out, "1/1");
  EXPECT_GE(accuracy, 90.0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: Training complete in: "));
  EXPECT_THAT(out, ::testing::HasSubstr("[rank0]: Saved model to " + model));
  // Rank 0 prints progress; rank 1 prints nothing at all.
  EXPECT_FALSE(lines_of_rank(out, 0).empty());
  EXPECT_TRUE(lines_of_rank(out, 1).empty()) << out;
  EXPECT_TRUE(lines_of_rank(l.err(), 1).empty()) << l.err();
  for (const auto& line : lines_of(out)) EXPECT_EQ(line.rfind("[rank0]: ", 0), 0u) << line;

  // The inner module's keys: a fresh single-process ConvNet loads it strictly.
  nn::models::ConvNet fresh;
  ASSERT_NO_THROW(nn::load_into(*fresh, model, /*strict=*/true));
  nn::Metadata meta;
  const nn::StateDict saved = nn::load(model, &meta);
  EXPECT_EQ(saved.size(), fresh->state_dict().size());
  EXPECT_EQ(meta["world_size"], "2");
  for (const auto& key : saved.keys()) EXPECT_EQ(key.rfind("module.", 0), std::string::npos) << key;
}

TEST_F(MnistDdp, TwoNodesOnOneMachineTrainTogether) {
  const std::string port = std::to_string(testing::free_port());
  auto node = [&](int node_rank) {
    return command({"--nnodes=2", "--node_rank=" + std::to_string(node_rank), "--nproc_per_node=1",
                    "--master_addr=127.0.0.1", "--master_port=" + port},
                   {"--epochs", "1", "--limit-train", "2000", "--save", "", "--timeout-s", "60"});
  };
  Launch node0(node(0));
  Launch node1(node(1));
  ASSERT_TRUE(node0.wait(150)) << node0.log();
  ASSERT_TRUE(node1.wait(30)) << node1.log();
  EXPECT_EQ(node0.exit_code(), 0) << node0.log();
  EXPECT_EQ(node1.exit_code(), 0) << node1.log();
  // Node 0 runs rank 0 and reports on both ranks; node 1 (rank 1) is silent.
  EXPECT_THAT(node0.out(), ::testing::HasSubstr("[rank0]: loom MNIST DDP: 2 ranks"));
  EXPECT_GT(accuracy_of(node0.out(), "1/1"), 50.0) << node0.out();
  EXPECT_TRUE(lines_of_rank(node1.out(), 1).empty()) << node1.log();
}

TEST_F(MnistDdp, ALoneNodeGivesUpAfterTheTimeoutNamingWhatItWaitedFor) {
  Launch l(command({"--nnodes=2", "--node_rank=0", "--nproc_per_node=1", "--master_addr=127.0.0.1",
                    "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "1", "--save", "", "--timeout-s", "2"}));
  ASSERT_TRUE(l.wait(30)) << l.log();
  EXPECT_NE(l.exit_code(), 0) << l.log();
  EXPECT_GE(l.seconds(), 1.9) << l.log();
  EXPECT_LT(l.seconds(), 12.0) << l.log();
  const std::string err = l.err();
  EXPECT_THAT(err, ::testing::HasSubstr("[rank0]: error on rank 0: ")) << err;
  EXPECT_THAT(err, ::testing::HasSubstr("timed out after 2000 ms")) << err;
  EXPECT_THAT(err, ::testing::HasSubstr("all 2 ranks")) << err;  // whom it waited for
  EXPECT_THAT(err, ::testing::HasSubstr("loomrun: exiting with code 1: rank 0")) << err;
}

TEST_F(MnistDdp, KillingAWorkerStopsTheJob) {
  const std::string pids = dir_;
  Launch l(command({"--nproc_per_node=2", "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "5", "--save", "", "--timeout-s", "5", "--pid-file-dir", pids}));
  ASSERT_TRUE(testing::wait_for_file(pids + "/rank1.pid", 60)) << "rank 1 never finished a step\n" << l.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // mid-training
  const pid_t victim = std::stoi(testing::read_text(pids + "/rank1.pid"));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(l.wait(120)) << l.log();
  const double after_kill = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(after_kill, 5.0) << l.log();  // well within the 5 s timeout: loomrun notices at once
  if (l.exit_code() == 1) {
    // Rare: rank 0 saw the closed connection and exited before loomrun
    // looked at its workers, so its failure is the one reported.
    EXPECT_THAT(l.err(), ::testing::HasSubstr("[rank0]: error on rank 0: ")) << l.log();
    EXPECT_THAT(l.err(), ::testing::HasSubstr("loomrun: exiting with code 1: rank 0")) << l.log();
  } else {
    EXPECT_EQ(l.exit_code(), 128 + SIGKILL) << l.log();
    EXPECT_THAT(l.err(), ::testing::HasSubstr("loomrun: rank 1 (local_rank 1, pid " + std::to_string(victim) +
                                              ") was killed by signal 9"))
        << l.log();
  }
  EXPECT_THAT(l.out(), ::testing::Not(::testing::HasSubstr("Training complete"))) << l.log();
}

TEST_F(MnistDdp, ARankThatSkipsAnAllReduceMakesEveryRankFail) {
  // Rank 1 skips step 5's backward and goes on to step 6's forward (a
  // buffer broadcast) while rank 0 all-reduces: the collectives disagree,
  // which gloo's consistency check reports on both ranks at once.
  Launch l(command({"--nproc_per_node=2", "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "1", "--save", "", "--timeout-s", "3", "--fault", "skip-allreduce:5"}));
  ASSERT_TRUE(l.wait(60)) << l.log();
  EXPECT_EQ(l.exit_code(), 1) << l.log();
  const std::string err = l.err();
  EXPECT_THAT(err, ::testing::HasSubstr("[rank1]: --fault: rank 1 skips the backward")) << err;
  // Both ranks see the disagreement; whichever loomrun reaps first stops the
  // other, which may not get to print its own error.
  EXPECT_THAT(err, ::testing::ContainsRegex("\\[rank[01]\\]: error on rank [01]: .*(ranks disagree|timed out after 3000 ms)"))
      << err;
  EXPECT_THAT(l.out(), ::testing::Not(::testing::HasSubstr("Training complete"))) << l.log();
}

TEST_F(MnistDdp, ARankThatStallsMakesTheOthersTimeOut) {
  // Rank 1 stops before step 5's backward and issues no collective: rank 0's
  // gradient all-reduce times out after --timeout-s instead of hanging, and
  // loomrun stops the stalled rank.
  Launch l(command({"--nproc_per_node=2", "--master_port=" + std::to_string(testing::free_port())},
                   {"--epochs", "1", "--save", "", "--timeout-s", "3", "--fault", "stall:5"}));
  ASSERT_TRUE(l.wait(60)) << l.log();
  EXPECT_EQ(l.exit_code(), 1) << l.log();
  const std::string err = l.err();
  EXPECT_THAT(err, ::testing::HasSubstr("[rank1]: --fault: rank 1 stalls before the backward of step 5")) << err;
  EXPECT_THAT(err, ::testing::ContainsRegex("\\[rank0\\]: error on rank 0: .*timed out after 3000 ms")) << err;
  EXPECT_THAT(err, ::testing::HasSubstr("loomrun: exiting with code 1: rank 0")) << err;
}

TEST_F(MnistDdp, BadFlagsFailClearly) {
  // No CUDA in this build or on this machine: a clear error before any rendezvous.
  if (!cuda::is_available()) {
    Launch l({kTrainer, "--device", "cuda", "--data-dir", data_});
    ASSERT_TRUE(l.wait(20)) << l.log();
    EXPECT_EQ(l.exit_code(), 1) << l.log();
    EXPECT_THAT(l.err(), ::testing::HasSubstr("--device cuda: no CUDA device is visible")) << l.log();
  }
  Launch fault({kTrainer, "--fault", "explode:3", "--data-dir", data_});
  ASSERT_TRUE(fault.wait(20)) << fault.log();
  EXPECT_EQ(fault.exit_code(), 1) << fault.log();
  EXPECT_THAT(fault.err(), ::testing::HasSubstr("--fault: unknown kind 'explode'")) << fault.log();
  Launch backend({kTrainer, "--backend", "mpi", "--data-dir", data_});
  ASSERT_TRUE(backend.wait(20)) << backend.log();
  EXPECT_NE(backend.exit_code(), 0) << backend.log();
  EXPECT_THAT(backend.err(), ::testing::HasSubstr("--backend")) << backend.log();
}

}  // namespace
}  // namespace loom
