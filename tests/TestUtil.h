// Helpers shared by loom's tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "loom.h"

namespace loom {
namespace testing {

// Expects `statement` to throw loom::Error whose message contains every one
// of the given substrings.
#define EXPECT_LOOM_ERROR(statement, ...)                                          \
  do {                                                                             \
    try {                                                                          \
      statement;                                                                   \
      ADD_FAILURE() << "expected loom::Error from: " #statement;                   \
    } catch (const ::loom::Error& e) {                                             \
      for (const std::string& part : std::vector<std::string>{__VA_ARGS__})        \
        EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr(part));            \
    }                                                                              \
  } while (0)

// Elementwise closeness with a readable failure message.
inline ::testing::AssertionResult AllClose(const Tensor& actual, const Tensor& expected,
                                           double rtol = 1e-5, double atol = 1e-8) {
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure()
           << "shape " << actual.describe() << " vs expected " << expected.describe();
  const auto a = actual.to_vector<double>();
  const auto b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a[i] - b[i]);
    if (!(diff <= atol + rtol * std::abs(b[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected "
                                           << b[i] << " (diff " << diff << ")";
  }
  return ::testing::AssertionSuccess();
}

// A float64 leaf of the given shape, uniformly random in [-1, 1), requiring grad.
inline Tensor random_leaf(IntList sizes, uint64_t seed = 0) {
  Generator gen(seed + 1);
  Tensor t = rand(std::move(sizes), kFloat64, &gen) * 2.0 - 1.0;
  return t.detach().requires_grad_();
}

// Gradcheck with gtest-friendly failure output.
inline ::testing::AssertionResult GradOk(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
    autograd::GradcheckOptions options = {}) {
  try {
    autograd::gradcheck(fn, inputs, options);
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << e.what();
  }
}

// Runs binary (a test binary: "/proc/self/exe" for this one) with one
// argument, in a child process whose environment also has each name=value of
// `env`; returns its exit status (-1 when it did not exit normally).  The
// parent owns the test runner's output files, so the child does not write
// them.
inline int run_with_env(const std::string& binary,
                        const std::vector<std::pair<std::string, std::string>>& env,
                        const std::string& arg) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    unsetenv("TEST_PREMATURE_EXIT_FILE");
    unsetenv("XML_OUTPUT_FILE");
    unsetenv("GTEST_OUTPUT");
    execl(binary.c_str(), binary.c_str(), arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The same with one variable, var=value.
inline int run_with_env(const std::string& binary, const char* var, const char* value,
                        const std::string& arg) {
  return run_with_env(binary, {{var, value}}, arg);
}

}  // namespace testing
}  // namespace loom
