// loomrun's pieces without processes: the command line, the worker
// environment and the line prefixer.
#include <unistd.h>

#include <sstream>

#include "distributed/launch/LaunchOptions.h"
#include "distributed/launch/LinePrefixer.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using distributed::LaunchOptions;
using distributed::parse_launch_options;

LaunchOptions parse(const std::vector<std::string>& args) {
  std::ostringstream help;
  auto options = parse_launch_options(args, help);
  LOOM_CHECK(options.has_value(), "unexpected help: ", help.str());
  return *options;
}

TEST(LaunchOptions, DefaultsAndProgram) {
  const auto o = parse({"train", "--epochs", "2"});
  EXPECT_EQ(o.nproc_per_node, 1);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.node_rank, 0);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(o.grace_period.count(), 5000);
  EXPECT_EQ(o.timeout.count(), 0);
  EXPECT_EQ(o.command, (std::vector<std::string>{"train", "--epochs", "2"}));
}

TEST(LaunchOptions, SpellingsAndPassThrough) {
  const auto o = parse({"--nproc-per-node", "4", "--nnodes=3", "--node_rank", "2", "--master-addr",
                        "10.0.0.1", "--master_port=1234", "--grace_period", "0.25", "--timeout",
                        "60", "./prog", "--nproc_per_node", "9", "--", "-x"});
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 3);
  EXPECT_EQ(o.node_rank, 2);
  EXPECT_EQ(o.world_size(), 12);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_EQ(o.grace_period.count(), 250);
  EXPECT_EQ(o.timeout.count(), 60000);
  EXPECT_EQ(o.command, (std::vector<std::string>{"./prog", "--nproc_per_node", "9", "--", "-x"}));
  // "--" ends loomrun's options even before a program that looks like a flag.
  EXPECT_EQ(parse({"--nproc_per_node", "2", "--", "-weird"}).command,
            (std::vector<std::string>{"-weird"}));
}

TEST(LaunchOptions, HorovodsNpIsNprocPerNode) {
  const auto o = parse({"-np", "3", "train", "-np", "7"});
  EXPECT_EQ(o.nproc_per_node, 3);
  EXPECT_EQ(o.world_size(), 3);
  // After the program, -np belongs to the program.
  EXPECT_EQ(o.command, (std::vector<std::string>{"train", "-np", "7"}));
  EXPECT_EQ(parse({"-np=2", "--master_port", "1234", "p"}).nproc_per_node, 2);
  EXPECT_EQ(parse({"--standalone", "-np", "4", "p"}).nproc_per_node, 4);
  EXPECT_LOOM_ERROR(parse({"-np", "0", "p"}), "--nproc_per_node", "'0'");
  EXPECT_LOOM_ERROR(parse({"-np", "two", "p"}), "--nproc_per_node", "'two'");
  std::ostringstream help;
  parse_launch_options({"--help"}, help);
  EXPECT_THAT(help.str(), ::testing::HasSubstr("-np N"));
}

TEST(LaunchOptions, StandalonePicksAPort) {
  const auto o = parse({"--standalone", "--master_addr", "10.1.1.1", "prog"});
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_GT(o.master_port, 0);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog"}));
  EXPECT_GE(parse({"--nproc_per_node", "auto", "p"}).nproc_per_node, 1);
}

TEST(LaunchOptions, HelpIsNotAnError) {
  std::ostringstream help;
  EXPECT_FALSE(parse_launch_options({"--help"}, help).has_value());
  EXPECT_THAT(help.str(), ::testing::HasSubstr("--nproc_per_node"));
}

TEST(LaunchOptions, BadFlagsThrow) {
  EXPECT_LOOM_ERROR(parse({"--nproc_per_node", "0", "p"}), "--nproc_per_node", "'0'");
  EXPECT_LOOM_ERROR(parse({"--nproc_per_node", "two", "p"}), "--nproc_per_node", "'two'");
  EXPECT_LOOM_ERROR(parse({"--nnodes", "0", "p"}), "--nnodes must be >= 1, got 0");
  EXPECT_LOOM_ERROR(parse({"--nnodes", "2", "--node_rank", "2", "p"}), "--node_rank",
                    "[0, 2)", "got 2");
  EXPECT_LOOM_ERROR(parse({"--node_rank=-1", "p"}), "--node_rank", "got -1");
  EXPECT_LOOM_ERROR(parse({"--master_port", "0", "p"}), "--master_port", "got 0");
  EXPECT_LOOM_ERROR(parse({"--master_port", "65536", "p"}), "--master_port", "got 65536");
  EXPECT_LOOM_ERROR(parse({"--monitor_interval", "0", "p"}), "--monitor_interval");
  EXPECT_LOOM_ERROR(parse({"--timeout", "-1", "p"}), "--timeout");
  EXPECT_LOOM_ERROR(parse({"--nproc_per_node", "2"}), "no program given");
  EXPECT_LOOM_ERROR(parse({}), "no program given");
  EXPECT_LOOM_ERROR(parse({"--bogus", "p"}), "--bogus");
  EXPECT_LOOM_ERROR(parse({"--nnodes", "x", "p"}), "--nnodes");
  EXPECT_LOOM_ERROR(parse({"--standalone", "--nnodes", "2", "p"}), "--standalone", "nnodes");
}

TEST(LaunchOptions, WorkerEnvironment) {
  const auto o = parse({"--nproc_per_node", "3", "--nnodes", "2", "--node_rank", "1",
                        "--master_addr", "host", "--master_port", "4000", "p"});
  const auto env = distributed::worker_environment(o, 2, 4);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["MASTER_ADDR"], "host");
  EXPECT_EQ(m["MASTER_PORT"], "4000");
  EXPECT_EQ(m["WORLD_SIZE"], "6");
  EXPECT_EQ(m["RANK"], "5");
  EXPECT_EQ(m["LOCAL_RANK"], "2");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(m["GROUP_RANK"], "1");
  EXPECT_EQ(m["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(distributed::worker_environment(o, 0, 0).size(), 7u);  // OMP_NUM_THREADS left alone
  EXPECT_LOOM_ERROR(distributed::worker_environment(o, 3, 0), "local_rank", "got 3");
}

TEST(LaunchOptions, DefaultOmpThreadsSplitsTheCores) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string keep = saved ? saved : "";
  ::unsetenv("OMP_NUM_THREADS");
  const int cores = distributed::available_cores();
  EXPECT_EQ(distributed::default_omp_threads(1), cores);
  EXPECT_EQ(distributed::default_omp_threads(cores * 4), 1);
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(distributed::default_omp_threads(2), 0);  // the user's setting wins
  if (saved) ::setenv("OMP_NUM_THREADS", keep.c_str(), 1);
  else ::unsetenv("OMP_NUM_THREADS");
}

// What a LinePrefixer writes, read back through a pipe.
std::string prefixed(const std::vector<std::string>& pieces, bool flush, size_t max_line = 1024) {
  int fds[2];
  LOOM_CHECK(::pipe(fds) == 0, "pipe");
  {
    distributed::LinePrefixer p("[rank3]: ", fds[1], max_line);
    for (const auto& piece : pieces) p.feed(piece.data(), piece.size());
    if (flush) p.flush();
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return out;
}

TEST(LinePrefixer, PrefixesWholeLines) {
  EXPECT_EQ(prefixed({"a\nb", "c\n\nd"}, false), "[rank3]: a\n[rank3]: bc\n[rank3]: \n");
  EXPECT_EQ(prefixed({"a\nb", "c\n\nd"}, true), "[rank3]: a\n[rank3]: bc\n[rank3]: \n[rank3]: d\n");
  EXPECT_EQ(prefixed({"x", "y", "z\n"}, true), "[rank3]: xyz\n");
  EXPECT_EQ(prefixed({}, true), "");
  // A line without end is cut at max_line.
  EXPECT_EQ(prefixed({"abcdefg"}, true, 3), "[rank3]: abc\n[rank3]: def\n[rank3]: g\n");
}

}  // namespace
}  // namespace loom
