// A worker for loomrun's tests.  It runs its arguments as a little script,
// left to right:
//   env              print "KEY=value" for the variables loomrun sets
//   args             print "arg: <a>" for every argument after "args"
//   print N          print "out i" to stdout and "err i" to stderr, i < N,
//                    then "partial" on stdout without a newline
//   pidfile DIR      write this process's pid to DIR/rank<RANK>.pid
//   wait_pids DIR N  wait (up to 10 s) until DIR holds N pid files
//   trap_term        on SIGTERM print "rank <RANK> got SIGTERM" and exit 0
//   exit_if_rank R C exit with code C if RANK is R
//   kill_if_rank R S raise signal S if RANK is R
//   sleep S          sleep S seconds (< 0: forever)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

int g_rank = -1;

extern "C" void on_term(int) {
  char line[64];
  const int n = std::snprintf(line, sizeof line, "rank %d got SIGTERM\n", g_rank);
  (void)!::write(STDOUT_FILENO, line, static_cast<size_t>(n));
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_env = std::getenv("RANK");
  g_rank = rank_env ? std::atoi(rank_env) : -1;
  for (int i = 1; i < argc; ++i) {
    const std::string cmd = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "launch_probe: %s needs an argument\n", cmd.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (cmd == "env") {
      for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                               "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMP_NUM_THREADS"}) {
        const char* value = std::getenv(name);
        std::printf("%s=%s\n", name, value ? value : "<unset>");
      }
    } else if (cmd == "args") {
      for (++i; i < argc; ++i) std::printf("arg: %s\n", argv[i]);
    } else if (cmd == "print") {
      const int n = std::atoi(next().c_str());
      for (int k = 0; k < n; ++k) {
        std::printf("out %d\n", k);
        std::fflush(stdout);
        std::fprintf(stderr, "err %d\n", k);
      }
      std::printf("partial");
    } else if (cmd == "pidfile") {
      const std::string dir = next();
      const std::string path = dir + "/rank" + std::to_string(g_rank) + ".pid";
      std::ofstream(path + ".tmp") << ::getpid() << "\n";
      std::rename((path + ".tmp").c_str(), path.c_str());  // readers never see it half written
    } else if (cmd == "wait_pids") {
      const std::string dir = next();
      const int n = std::atoi(next().c_str());
      for (int tries = 0; tries < 2000; ++tries) {
        int found = 0;
        for (int r = 0; r < 64; ++r)
          found += ::access((dir + "/rank" + std::to_string(r) + ".pid").c_str(), R_OK) == 0;
        if (found >= n) break;
        ::usleep(5000);
      }
    } else if (cmd == "trap_term") {
      ::signal(SIGTERM, on_term);
    } else if (cmd == "exit_if_rank") {
      const int r = std::atoi(next().c_str());
      const int code = std::atoi(next().c_str());
      if (r == g_rank) {
        std::fflush(nullptr);
        return code;
      }
    } else if (cmd == "kill_if_rank") {
      const int r = std::atoi(next().c_str());
      const int sig = std::atoi(next().c_str());
      if (r == g_rank) {
        std::fflush(nullptr);
        ::raise(sig);
      }
    } else if (cmd == "sleep") {
      const double seconds = std::atof(next().c_str());
      std::fflush(nullptr);
      if (seconds < 0)
        while (true) ::pause();
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    } else {
      std::fprintf(stderr, "launch_probe: unknown command '%s'\n", cmd.c_str());
      return 64;
    }
  }
  std::fflush(nullptr);
  return 0;
}
