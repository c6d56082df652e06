// The README's main job end to end: the MNIST trainer reaches >= 96% test
// accuracy in 2 epochs on the default data (tools/setup.sh), and the model it
// saves loads into PyTorch's ConvNet (strict) with the same test accuracy.
#include <climits>
#include <cstdlib>
#include <regex>

#include "tests/PythonRef.h"

namespace loom {
namespace {

// The source tree, found through a runfile that links to it.
std::string workspace_root() {
  char buf[PATH_MAX];
  if (!::realpath("tools/pyloom/loom_torch.py", buf)) return "";
  std::string p = buf;
  return p.substr(0, p.size() - std::string("/tools/pyloom/loom_torch.py").size());
}

std::string run(const std::string& cmd, int& rc) {
  std::string out;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while (pipe && (n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pipe ? ::pclose(pipe) : -1;
  rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(MnistTrainer, ReachesNinetySixPercentAndLoadsInPyTorch) {
  const char* env = std::getenv("LOOM_MNIST_DIR");
  const std::string data = env && *env ? env : workspace_root() + "/data/mnist";
  ASSERT_TRUE(::access((data + "/t10k-labels-idx1-ubyte").c_str(), R_OK) == 0 ||
              ::access((data + "/t10k-labels-idx1-ubyte.gz").c_str(), R_OK) == 0)
      << "no MNIST data in " << data << "; run tools/setup.sh (or set LOOM_MNIST_DIR)";
  const std::string dir = testing::make_temp_dir();
  const std::string model = dir + "/mnist.safetensors";
  int rc = 0;
  const std::string log = run("examples/mnist/train --epochs 2 --batch-size 128 --lr 0.01 --momentum 0.9 "
                              "--data-dir " + data + " --save " + model,
                              rc);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("Training complete in: "));
  std::smatch m;
  std::string rest = log;
  double accuracy = -1;
  const std::regex re("epoch 2/2 done in [^:]*: test accuracy ([0-9.]+)%");
  ASSERT_TRUE(std::regex_search(rest, m, re)) << log;
  accuracy = std::stod(m[1]);
  EXPECT_GE(accuracy, 96.0) << log;

  std::string py;
  ASSERT_EQ(testing::run_python("eval_mnist.py", model + " " + data, py), 0) << py;
  const std::regex torch_re("torch accuracy ([0-9.]+)%");
  ASSERT_TRUE(std::regex_search(py, m, torch_re)) << py;
  // Same weights, same data: the same predictions up to rounding on a knife edge.
  EXPECT_NEAR(std::stod(m[1]), accuracy, 0.1) << "loom: " << log << "\ntorch: " << py;
}

// --cuda-graph needs a GPU device: on the CPU it is a clear error, not a
// silent eager run.
TEST(MnistTrainer, CudaGraphOnTheCpuIsAnError) {
  int rc = 0;
  const std::string log = run("examples/mnist/train --device cpu --cuda-graph --epochs 1", rc);
  EXPECT_EQ(rc, 1) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("--cuda-graph needs a CUDA device (--device cuda), got cpu"));
}

// --devices cpu:0,cpu:1 trains through nn::DataParallel: one epoch on the
// default data reaches the accuracy a single device reaches in one epoch.
TEST(MnistTrainer, DataParallelOverTwoCpuDevices) {
  const char* env = std::getenv("LOOM_MNIST_DIR");
  const std::string data = env && *env ? env : workspace_root() + "/data/mnist";
  ASSERT_TRUE(::access((data + "/t10k-labels-idx1-ubyte").c_str(), R_OK) == 0 ||
              ::access((data + "/t10k-labels-idx1-ubyte.gz").c_str(), R_OK) == 0)
      << "no MNIST data in " << data << "; run tools/setup.sh (or set LOOM_MNIST_DIR)";
  int rc = 0;
  const std::string log = run("examples/mnist/train --epochs 1 --devices cpu:0,cpu:1 --threads 2 "
                              "--save '' --data-dir " + data, rc);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("DataParallel over cpu:0,cpu:1 (1 intra-op threads per device)"));
  std::smatch m;
  const std::regex re("epoch 1/1 done in [^:]*: test accuracy ([0-9.]+)%");
  ASSERT_TRUE(std::regex_search(log, m, re)) << log;
  EXPECT_GE(std::stod(m[1]), 90.0) << log;
}

TEST(MnistTrainer, DevicesFlagErrors) {
  int rc = 0;
  std::string log = run("examples/mnist/train --devices cpu:0,cpu:0 --epochs 1", rc);
  EXPECT_EQ(rc, 1) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("--devices: cpu:0 is listed twice"));
  log = run("examples/mnist/train --device cpu:1 --devices cpu:0,cpu:1 --epochs 1", rc);
  EXPECT_EQ(rc, 1) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("--device cpu:1 and --devices cpu:0,cpu:1 disagree"));
}

}  // namespace
}  // namespace loom
