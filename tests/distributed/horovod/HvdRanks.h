// Running hvd ranks in tests: forked processes (distributed::spawn), each
// between hvd::init() (env://, the variables spawn sets) and hvd::shutdown().
// GoogleTest's EXPECTs do not cross the fork, so the ranks check with
// LOOM_CHECK / expect_error: a failed check throws, spawn stops the other
// ranks and reports "rank R failed ...: <message>", which fails the test.
// The parent does no tensor work before forking (libgomp does not survive
// fork); every rank computes its own references.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "distributed/horovod/horovod.h"
#include "distributed/launch/Spawn.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing {

// Runs fn(rank) on `world` ranks; adds a test failure naming the rank that
// failed.  A rank that hangs is killed after limit_s seconds (a failure).
// options.timeout (collectives, rendezvous) defaults to 30 s here.
inline void run_hvd_ranks(int world, const std::function<void(int rank)>& fn, hvd::InitOptions options = {},
                          int limit_s = 120) {
  if (options.timeout == hvd::InitOptions().timeout) options.timeout = std::chrono::seconds(30);
  distributed::SpawnOptions spawn_options;
  spawn_options.timeout = std::chrono::seconds(limit_s);
  try {
    distributed::spawn(
        [&](int rank) {
          hvd::init(options);
          fn(rank);
          hvd::shutdown();
        },
        world, spawn_options);
  } catch (const Error& e) {
    ADD_FAILURE() << world << " ranks: " << e.what();
  }
}

// Throws unless fn throws a loom::Error whose message contains every part.
inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts,
                         const std::string& what) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      LOOM_CHECK(message.find(part) != std::string::npos, what, ": the error does not say \"", part,
                 "\": ", message);
    return;
  }
  LOOM_FAIL(what, ": expected a loom::Error, nothing was thrown");
}

// The largest |a - b| over the elements of two lists of tensors (same shapes).
inline double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  LOOM_CHECK(a.size() == b.size(), "max_abs_diff: ", a.size(), " vs ", b.size(), " tensors");
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    LOOM_CHECK(a[i].sizes() == b[i].sizes(), "max_abs_diff: tensor ", i, " is ", a[i].describe(), " vs ",
               b[i].describe());
    const auto x = a[i].to_vector<double>(), y = b[i].to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

// Copies of a module's parameters.
inline std::vector<Tensor> parameter_values(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.detach().to(Device(kCPU)).clone());
  return out;
}

}  // namespace testing
}  // namespace loom
