// examples/model_parallel's binaries run end to end: toy updates parameters on
// both devices, split_size_experiment --quick writes its CSV files (and PNG
// figures where gnuplot is installed), ddp_mp keeps the ranks' parameters equal
// when it spawns its ranks and under loomrun.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

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

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mpexp_XXXXXX";
  return ::mkdtemp(tmpl.data()) ? tmpl : "";
}

TEST(ModelParallelBinaries, ToyUpdatesParametersOnBothDevices) {
  int rc = 0;
  const std::string log = run("examples/model_parallel/toy --devices cpu:0,cpu:1", rc);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_THAT(log, HasSubstr("loss"));
  EXPECT_THAT(log, HasSubstr("net1.weight    cpu:0"));
  EXPECT_THAT(log, HasSubstr("net2.bias      cpu:1"));
  EXPECT_THAT(log, HasSubstr("every parameter was updated on its own device"));
  const std::string bad = run("examples/model_parallel/toy --devices cpu:0", rc);
  EXPECT_EQ(rc, 1) << bad;
  EXPECT_THAT(bad, HasSubstr("--devices: expected 2 comma-separated devices"));
}

TEST(ModelParallelBinaries, SplitSizeExperimentQuickWritesCsvAndFigures) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  int rc = 0;
  // Split size 3 does not divide the batch of 8.
  const std::string log = run("examples/model_parallel/split_size_experiment --quick --repeats 1 "
                              "--split-sizes 3 --pipelined-split 3 --out-dir " + dir, rc);
  ASSERT_EQ(rc, 0) << log;
  for (const char* mode : {"single", "model_parallel", "pipelined", "pipeline", "stream_pipeline"})
    EXPECT_THAT(log, HasSubstr(std::string("\n") + mode + " ")) << log;
  const std::string results = read_file(dir + "/results.csv");
  EXPECT_THAT(results, HasSubstr("mode,split_size,mean_s,std_s,speedup,times_s\nsingle,0,"));
  EXPECT_THAT(results, HasSubstr("\nstream_pipeline,3,"));
  EXPECT_THAT(read_file(dir + "/modes.csv"), HasSubstr("\"Pipelined (split 3)\","));
  EXPECT_THAT(read_file(dir + "/split_sizes.csv"), HasSubstr("\n3,"));
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    for (const char* png : {"/modes.png", "/split_size.png"}) {
      const std::string bytes = read_file(dir + png);
      ASSERT_GT(bytes.size(), 8u) << png << "\n" << log;
      EXPECT_EQ(bytes.substr(1, 3), "PNG") << png;
    }
  } else {
    EXPECT_THAT(log, HasSubstr("to draw the figures"));
  }
  const std::string bad = run("examples/model_parallel/split_size_experiment --quick --split-sizes 0", rc);
  EXPECT_EQ(rc, 1) << bad;
  EXPECT_THAT(bad, HasSubstr("--split-sizes: every value must be positive"));
}

TEST(ModelParallelBinaries, DdpMpKeepsRanksEqualSpawnedAndUnderLoomrun) {
  int rc = 0;
  std::string log = run("examples/model_parallel/ddp_mp --steps 2", rc);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_THAT(log, HasSubstr("rank 0: parameters identical on all 2 ranks"));
  EXPECT_THAT(log, HasSubstr("rank 1: parameters identical on all 2 ranks"));
  EXPECT_THAT(log, HasSubstr("rank 1/2 (net1 on cpu:2, net2 on cpu:3)"));
  log = run("distributed/launch/loomrun --nproc_per_node 2 examples/model_parallel/ddp_mp --steps 2", rc);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_THAT(log, HasSubstr("[rank0]: rank 0: parameters identical on all 2 ranks"));
  EXPECT_THAT(log, HasSubstr("[rank1]: rank 1: parameters identical on all 2 ranks"));
}

}  // namespace
}  // namespace loom
