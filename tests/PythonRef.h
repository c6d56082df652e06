// Running the PyTorch reference (tools/pyloom, /usr/bin/python3 with torch
// 1.13) from a test, and comparing against it.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensor/ShapeUtil.h"
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

// max |a - b| / max(max |b|, floor): a scale-free error of `a` (loom's
// result) against `b` (the reference).  `floor` keeps quantities that are zero
// in exact arithmetic (a convolution bias followed by batch norm has gradient
// 0 up to rounding) from dividing noise by noise.
//
// The shapes must agree: a result of the wrong shape (an empty one included)
// is never "close".  Throws loom::Error naming both shapes when they differ,
// or when either tensor is undefined.  A NaN or infinity where the reference
// has a different value makes the error infinite (NaN against NaN and equal
// infinities agree).
inline double relative_error(const Tensor& a, const Tensor& b, double floor = 1e-12) {
  LOOM_CHECK(a.defined() && b.defined(), "relative_error: the ",
             a.defined() ? "reference" : "result", " is undefined");
  LOOM_CHECK(a.sizes() == b.sizes(), "relative_error: result has shape ", shape_str(a.sizes()),
             " but the reference has shape ", shape_str(b.sizes()));
  const auto x = a.to_vector<double>();
  const auto y = b.to_vector<double>();
  double diff = 0, scale = floor;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(y[i])) scale = std::max(scale, std::abs(y[i]));
    if (x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))) continue;
    const double d = std::abs(x[i] - y[i]);
    diff = std::isfinite(d) ? std::max(diff, d) : INFINITY;
  }
  return diff / scale;
}

// gtest predicate: `actual` has `expected`'s shape and relative_error(actual,
// expected, floor) <= tolerance.  The failure message names both shapes, or
// the error and the element that differs most.
//   EXPECT_TRUE(RelativeErrorAtMost(logits, ref.at("logits"), 1e-4)) << "logits";
inline ::testing::AssertionResult RelativeErrorAtMost(const Tensor& actual, const Tensor& expected,
                                                      double tolerance, double floor = 1e-12) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure()
           << (actual.defined() ? "the reference" : "the result") << " is undefined";
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.sizes())
                                         << " vs reference shape " << shape_str(expected.sizes());
  const double error = relative_error(actual, expected, floor);
  if (error <= tolerance) return ::testing::AssertionSuccess();
  const auto x = actual.to_vector<double>();
  const auto y = expected.to_vector<double>();
  size_t worst = 0;
  double worst_diff = -1;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))) continue;
    double d = std::abs(x[i] - y[i]);
    if (!std::isfinite(d)) d = INFINITY;
    if (d > worst_diff) worst = i, worst_diff = d;
  }
  return ::testing::AssertionFailure()
         << "relative error " << error << " > " << tolerance << " (shape "
         << shape_str(actual.sizes()) << "; worst at flat index " << worst << ": " << x[worst]
         << " vs reference " << y[worst] << ")";
}

}  // namespace testing
}  // namespace loom
