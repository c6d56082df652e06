// loomrun end to end: the launcher binary runs launch_probe workers (both
// found in this test's runfiles, relative to the working directory).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/PythonRef.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

const char* kLoomrun = "distributed/launch/loomrun";
const char* kProbe = "tests/distributed/launch/launch_probe";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// One loomrun run with stdout and stderr in files.
struct Launch {
  pid_t pid = -1;
  std::string dir;
  int status = -1;
  double seconds = 0;
  Clock::time_point start;

  std::string out() const { return read_file(dir + "/stdout"); }
  std::string err() const { return read_file(dir + "/stderr"); }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  std::string log() const { return "stdout:\n" + out() + "stderr:\n" + err(); }
};

Launch start(std::vector<std::string> args) {
  Launch l;
  l.dir = testing::make_temp_dir();
  args.insert(args.begin(), kLoomrun);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = l.dir + "/stdout", err = l.dir + "/stderr";
  l.start = Clock::now();
  l.pid = ::fork();
  if (l.pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::execv(argv[0], argv.data());
    ::_exit(99);
  }
  return l;
}

// Waits up to `limit` seconds; on timeout kills loomrun and fails.
void finish(Launch& l, double limit = 10) {
  while (true) {
    const pid_t got = ::waitpid(l.pid, &l.status, WNOHANG);
    l.seconds = std::chrono::duration<double>(Clock::now() - l.start).count();
    if (got == l.pid) return;
    if (l.seconds > limit) {
      ::kill(l.pid, SIGKILL);
      ::waitpid(l.pid, &l.status, 0);
      ADD_FAILURE() << "loomrun still running after " << limit << " s\n" << l.log();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Launch run(std::vector<std::string> args, double limit = 10) {
  Launch l = start(std::move(args));
  finish(l, limit);
  return l;
}

// Waits until `path` exists (a worker wrote its pid file).
bool wait_for_file(const std::string& path, double limit = 5) {
  const auto until = Clock::now() + std::chrono::duration<double>(limit);
  while (Clock::now() < until) {
    if (::access(path.c_str(), R_OK) == 0 && !read_file(path).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST(Loomrun, EveryLineCarriesItsRank) {
  Launch l = run({"--nproc_per_node", "3", kProbe, "print", "50"});
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  const std::regex out_line(R"(\[rank([0-2])\]: (out [0-9]+|partial))");
  const std::regex err_line(R"(\[rank([0-2])\]: err [0-9]+)");
  std::map<std::string, int> per_rank;
  for (const auto& line : lines_of(l.out())) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, out_line)) << "'" << line << "'\n" << l.log();
    ++per_rank[m[1]];
  }
  EXPECT_EQ(per_rank, (std::map<std::string, int>{{"0", 51}, {"1", 51}, {"2", 51}}));
  int err_lines = 0;
  for (const auto& line : lines_of(l.err())) {
    if (line.rfind("loomrun: ", 0) == 0) continue;  // the launcher's own notes
    EXPECT_TRUE(std::regex_match(line, err_line)) << "'" << line << "'";
    ++err_lines;
  }
  EXPECT_EQ(err_lines, 150);
  // Lines of one rank keep their order; the partial last line is flushed.
  const auto out = l.out();
  EXPECT_LT(out.find("[rank1]: out 9\n"), out.find("[rank1]: out 10\n"));
  EXPECT_NE(out.find("[rank2]: partial\n"), std::string::npos);
}

TEST(Loomrun, WorkerEnvironmentForSecondNode) {
  Launch l = run({"--nproc_per_node", "2", "--nnodes", "2", "--node_rank", "1", "--master_addr",
                  "10.1.2.3", "--master_port", "4242", kProbe, "env"});
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  const std::string out = l.out();
  for (int local = 0; local < 2; ++local) {
    const std::string p = "[rank" + std::to_string(2 + local) + "]: ";
    for (const std::string& kv : std::vector<std::string>
         {"MASTER_ADDR=10.1.2.3", "MASTER_PORT=4242", "WORLD_SIZE=4",
          "RANK=" + std::to_string(2 + local), "LOCAL_RANK=" + std::to_string(local),
          "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "OMP_NUM_THREADS=1"})
      EXPECT_NE(out.find(p + kv + "\n"), std::string::npos) << p + kv << "\n" << l.log();
  }
}

TEST(Loomrun, ArgumentsReachTheProgramUntouched) {
  Launch l = run({"--nproc_per_node=1", kProbe, "args", "--nproc_per_node", "7", "--", "-x",
                  "two words"});
  ASSERT_EQ(l.exit_code(), 0) << l.log();
  EXPECT_EQ(l.out(),
            "[rank0]: arg: --nproc_per_node\n[rank0]: arg: 7\n[rank0]: arg: --\n"
            "[rank0]: arg: -x\n[rank0]: arg: two words\n");
}

TEST(Loomrun, FailingWorkerStopsTheOthers) {
  const std::string pids = testing::make_temp_dir();
  Launch l = run({"--nproc_per_node", "3", "--grace_period", "2", kProbe, "trap_term", "pidfile",
                  pids, "wait_pids", pids, "3", "exit_if_rank", "1", "3", "sleep", "-1"});
  EXPECT_EQ(l.exit_code(), 3) << l.log();
  EXPECT_LT(l.seconds, 4.0) << l.log();
  const std::string pid1 = lines_of(read_file(pids + "/rank1.pid")).at(0);
  EXPECT_THAT(l.err(), ::testing::HasSubstr("loomrun: rank 1 (local_rank 1, pid " + pid1 +
                                            ") failed with exit code 3"));
  // The sleepers were asked to stop with SIGTERM and are gone.
  EXPECT_THAT(l.out(), ::testing::HasSubstr("[rank0]: rank 0 got SIGTERM"));
  EXPECT_THAT(l.out(), ::testing::HasSubstr("[rank2]: rank 2 got SIGTERM"));
  for (int r : {0, 2})
    EXPECT_TRUE(process_gone(std::stoi(read_file(pids + "/rank" + std::to_string(r) + ".pid"))));
}

TEST(Loomrun, KilledWorkerGivesSignalExitCodeAndSigkillAfterGrace) {
  // Rank 1 kills itself with SIGKILL (9); rank 0 sleeps until loomrun's
  // SIGTERM ends it.
  Launch l = run({"--nproc_per_node", "2", "--grace_period", "0.5", kProbe, "kill_if_rank", "1",
                  "9", "sleep", "-1"});
  EXPECT_EQ(l.exit_code(), 128 + 9) << l.log();
  EXPECT_THAT(l.err(), ::testing::HasSubstr("was killed by signal 9 (Killed)"));
  EXPECT_LT(l.seconds, 4.0);
}

TEST(Loomrun, SigtermIsForwardedToWorkers) {
  const std::string pids = testing::make_temp_dir();
  Launch l = start({"--nproc_per_node", "2", kProbe, "trap_term", "pidfile", pids, "sleep", "-1"});
  ASSERT_TRUE(wait_for_file(pids + "/rank0.pid") && wait_for_file(pids + "/rank1.pid"));
  ::kill(l.pid, SIGTERM);
  finish(l, 5);
  EXPECT_EQ(l.exit_code(), 128 + SIGTERM) << l.log();
  EXPECT_THAT(l.err(), ::testing::HasSubstr("received SIGTERM"));
  EXPECT_THAT(l.out(), ::testing::HasSubstr("[rank0]: rank 0 got SIGTERM"));
  EXPECT_THAT(l.out(), ::testing::HasSubstr("[rank1]: rank 1 got SIGTERM"));
  for (int r : {0, 1})
    EXPECT_TRUE(process_gone(std::stoi(read_file(pids + "/rank" + std::to_string(r) + ".pid"))));
}

TEST(Loomrun, ProcessesAWorkerStartedAreStoppedWithIt) {
  const std::string pids = testing::make_temp_dir();
  Launch l = start({"--nproc_per_node", "1", "/bin/sh", "-c",
                    "sleep 100 & echo $! > " + pids + "/tmp; mv " + pids + "/tmp " + pids +
                        "/rank0.pid; wait"});
  ASSERT_TRUE(wait_for_file(pids + "/rank0.pid"));
  const pid_t grandchild = std::stoi(read_file(pids + "/rank0.pid"));
  ::kill(l.pid, SIGTERM);
  finish(l, 5);
  EXPECT_EQ(l.exit_code(), 128 + SIGTERM) << l.log();
  // The sleep is not loomrun's child: wait a little for init to reap it.
  for (int i = 0; i < 200 && !process_gone(grandchild); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(process_gone(grandchild));
}

TEST(Loomrun, WorkersIgnoringSigintAreKilledAfterGrace) {
  const std::string pids = testing::make_temp_dir();
  // A worker that ignores the forwarded SIGINT gets SIGKILL after the grace period.
  Launch l = start({"--nproc_per_node", "1", "--grace_period", "0.3", "/bin/sh", "-c",
                    "trap '' INT; echo $$ > " + pids + "/rank0.pid; while :; do sleep 0.05; done"});
  ASSERT_TRUE(wait_for_file(pids + "/rank0.pid"));
  ::kill(l.pid, SIGINT);
  finish(l, 5);
  EXPECT_EQ(l.exit_code(), 128 + SIGINT) << l.log();
  EXPECT_THAT(l.err(), ::testing::HasSubstr("sending SIGKILL"));
  EXPECT_LT(l.seconds, 3.0);
}

TEST(Loomrun, TimeoutStopsTheJob) {
  Launch l = run({"--nproc_per_node", "2", "--timeout", "0.3", kProbe, "sleep", "-1"});
  EXPECT_EQ(l.exit_code(), 124) << l.log();
  EXPECT_THAT(l.err(), ::testing::HasSubstr("timeout of 0.3 s reached"));
}

TEST(Loomrun, ProgramThatCannotRunFailsClearly) {
  Launch l = run({"--nproc_per_node", "2", "no_such_program_for_loomrun"});
  EXPECT_EQ(l.exit_code(), 127) << l.log();
  EXPECT_THAT(l.err(), ::testing::HasSubstr("cannot execute 'no_such_program_for_loomrun'"));
  EXPECT_THAT(l.err(), ::testing::HasSubstr("No such file or directory"));
}

TEST(Loomrun, BadFlagsFailBeforeStartingAnything) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--nproc_per_node", "0", kProbe},
           {"--nnodes", "2", "--node_rank", "2", kProbe},
           {"--master_port", "99999", kProbe},
           {"--nproc_per_node", "2"},
       }) {
    Launch l = run(args);
    EXPECT_EQ(l.exit_code(), 2) << l.log();
    EXPECT_THAT(l.err(), ::testing::HasSubstr("loomrun: error: "));
    EXPECT_EQ(l.out(), "");
  }
}

}  // namespace
}  // namespace loom
