#include "distributed/launch/ExitStatus.h"

#include <sys/wait.h>

#include <csignal>
#include <cstring>

namespace loom {
namespace distributed {
namespace {

const char* signal_name(int signal) {
  switch (signal) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    default: return nullptr;
  }
}

}  // namespace

std::string describe_signal(int signal) {
  const char* name = signal_name(signal);
  const char* text = ::strsignal(signal);
  std::string out = name ? name : "signal " + std::to_string(signal);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

std::string describe_exit_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* text = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (text ? std::string(" (") + text + ")" : "");
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return std::string(code == 0 ? "exited" : "failed") + " with exit code " + std::to_string(code);
}

int shell_exit_code(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace distributed
}  // namespace loom
