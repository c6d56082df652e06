// Running the PyTorch reference (tools/pyloom, /usr/bin/python3 with torch
// 1.13) from a test, and comparing against it.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/TestUtil.h"

namespace loom {
namespace testing {

// A fresh temporary directory for one test's files.
inline std::string make_temp_dir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/loom_XXXXXX";
  char* made = ::mkdtemp(tmpl.data());
  LOOM_CHECK(made != nullptr, "mkdtemp failed for ", tmpl);
  return made;
}

// Runs `/usr/bin/python3 tools/pyloom/<script> args`; returns its exit code and
// appends its output (stdout + stderr) to `output`.
inline int run_python(const std::string& script, const std::string& args, std::string& output) {
  const std::string cmd = "cd tools/pyloom && /usr/bin/python3 " + script + " " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// max |a - b| / max(max |b|, floor): a scale-free error.  `floor` keeps
// quantities that are zero in exact arithmetic (a convolution bias followed
// by batch norm has gradient 0 up to rounding) from dividing noise by noise.
inline double relative_error(const Tensor& a, const Tensor& b, double floor = 1e-12) {
  const auto x = a.to_vector<double>();
  const auto y = b.to_vector<double>();
  double diff = 0, scale = floor;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

}  // namespace testing
}  // namespace loom
