// How a child process ended, in words and as a shell-style exit code; shared
// by loomrun and distributed::spawn so both report failures the same way.
#pragma once

#include <string>

namespace loom {
namespace distributed {

// "failed with exit code 3", "exited with exit code 0" or
// "was killed by signal 9 (Killed)", for a status from waitpid.
std::string describe_exit_status(int status);

// The exit code a shell reports for a waitpid status: the child's exit code,
// or 128 + signal number when a signal killed it.
int shell_exit_code(int status);

// "SIGTERM (Terminated)" for a signal number.
std::string describe_signal(int signal);

}  // namespace distributed
}  // namespace loom
