// ProcessGroupGloo with ranks as threads of one process (a HashStore between
// them): every collective and reduce op on every dtype, checked against
// values computed here; empty and 64 MiB tensors; argument errors; mismatched
// ranks; timeouts.
//
// Built a second time with LOOM_RANKS_AS_PROCESSES (target
// process_group_gloo_processes_test): then every rank is a forked process
// (distributed::spawn) meeting the others through a TCPStore, so the same
// suite runs across real processes on loopback.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/store/HashStore.h"
#ifdef LOOM_RANKS_AS_PROCESSES
#include "distributed/launch/Spawn.h"
#include "distributed/store/TCPStore.h"
#endif
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;

ProcessGroupGlooOptions short_options(int threads = 2, milliseconds timeout = milliseconds(5000)) {
  ProcessGroupGlooOptions options;
  options.timeout = timeout;
  options.threads = threads;
  return options;
}

#ifndef LOOM_RANKS_AS_PROCESSES
constexpr bool kRanksAreProcesses = false;

// Runs fn(pg, rank) on `size` threads, each rank with its own process group
// over one HashStore; fails the test with any rank's exception.
void run_ranks(int size, const std::function<void(ProcessGroupGloo&, int)>& fn,
               ProcessGroupGlooOptions options = short_options()) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(milliseconds(10000));
  std::vector<std::string> failures(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupGloo pg(store, r, size, options);
        fn(pg, r);
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << size;
}
#else
constexpr bool kRanksAreProcesses = true;

// Runs fn(pg, rank) in `size` forked processes that meet through a TCPStore
// on loopback.  A rank whose expectations failed (gtest prints them from the
// child) or that threw makes spawn throw, which fails the test here.
void run_ranks(int size, const std::function<void(ProcessGroupGloo&, int)>& fn,
               ProcessGroupGlooOptions options = short_options()) {
  SpawnOptions spawn_options;
  spawn_options.timeout = milliseconds(60000);
  try {
    spawn(
        [&](int r) {
          TCPStoreOptions store_options;
          store_options.world_size = size;
          store_options.is_master = r == 0;
          store_options.timeout = milliseconds(10000);
          auto store = std::make_shared<TCPStore>(std::getenv("MASTER_ADDR"), std::atoi(std::getenv("MASTER_PORT")),
                                                  store_options);
          {
            ProcessGroupGloo pg(store, r, size, options);
            fn(pg, r);
            pg.barrier()->wait();  // rank 0's store outlives every rank's use of it
          }
          if (::testing::Test::HasFailure()) throw Error("expectations failed on this rank (printed above)");
        },
        size, spawn_options);
  } catch (const Error& e) {
    ADD_FAILURE() << "with " << size << " processes: " << e.what();
  }
}
#endif

const DType kDTypes[] = {kFloat32, kFloat64, kInt32, kInt64, kUInt8, kBool};

// The ways a collective can travel (distributed/gloo/Worker.cpp, "Small
// messages"): inside the consistency check's all-gather, as an all-gather of
// its own (check off), or through gloo's own algorithm (small path off).  The
// collective suites below run each of them.
struct Path {
  const char* name;
  ProcessGroupGlooOptions options;
};
std::vector<Path> paths() {
  return {{"small path with check", short_options()},
          {"small path without check", short_options().set_check_consistency(false)},
          {"gloo algorithm", short_options().set_small_message_bytes(0)}};
}

// Rank r's value at element i: small integers (1..3, or 0/1 for bool) so
// every op is exact in every dtype.
double value(int r, int64_t i, DType dtype) {
  if (dtype == kBool) return ((r + i) % 3) != 0 ? 1 : 0;
  return static_cast<double>((r * 7 + i) % 3 + 1);
}

Tensor make(int r, int64_t n, DType dtype, int64_t offset = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(r, i + offset, dtype);
  return tensor(v, {n}).to(dtype);
}

double combine(ReduceOp op, DType dtype, double a, double b) {
  if (dtype == kBool) {
    const bool x = a != 0, y = b != 0;
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? (x || y) : (x && y);
  }
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return a + b;
    case ReduceOp::Product: return a * b;
    case ReduceOp::Min: return std::min(a, b);
    case ReduceOp::Max: return std::max(a, b);
  }
  return 0;
}

std::vector<double> expected_reduce(int size, int64_t n, DType dtype, ReduceOp op,
                                    int64_t offset = 0) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    double acc = value(0, i + offset, dtype);
    for (int r = 1; r < size; ++r) acc = combine(op, dtype, acc, value(r, i + offset, dtype));
    if (op == ReduceOp::Avg) acc /= size;
    out[i] = acc;
  }
  return out;
}

void expect_values(const Tensor& t, const std::vector<double>& expected, const std::string& what) {
  const auto got = t.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-6 * std::abs(expected[i])) << what << " element " << i;
  }
}

std::vector<ReduceOp> ops_for(DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max};
  if (is_floating_point(dtype)) ops.push_back(ReduceOp::Avg);
  return ops;
}

std::string label(DType dtype, ReduceOp op, int size) {
  return dtype_name(dtype) + " " + to_string(op) + " size " + std::to_string(size);
}

// ---- reductions ------------------------------------------------------------------------

TEST(ProcessGroupGloo, AllReduceEveryOpAndDtype) {
  for (const Path& path : paths()) {
    SCOPED_TRACE(path.name);
    for (int size : {2, 3, 4}) {
      run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
        EXPECT_EQ(pg.backend(), "gloo");
        EXPECT_EQ(pg.rank(), r);
        EXPECT_EQ(pg.size(), size);
        for (DType dtype : kDTypes) {
          for (ReduceOp op : ops_for(dtype)) {
            // 7 elements: fewer than the ring's chunks; 1000: uneven chunks.
            for (int64_t n : {7, 1000}) {
              Tensor t = make(r, n, dtype);
              pg.all_reduce(t, op)->wait();
              expect_values(t, expected_reduce(size, n, dtype, op), label(dtype, op, size));
            }
          }
        }
      }, path.options);
    }
  }
}

TEST(ProcessGroupGloo, ReduceEveryRootOpAndDtype) {
  for (int size : {2, 3, 4}) {
    run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
      for (DType dtype : kDTypes) {
        for (ReduceOp op : ops_for(dtype)) {
          for (int root = 0; root < size; ++root) {
            const int64_t n = 37;
            Tensor t = make(r, n, dtype);
            pg.reduce(t, root, op)->wait();
            if (r == root) {
              expect_values(t, expected_reduce(size, n, dtype, op), label(dtype, op, size));
            } else {
              expect_values(t, make(r, n, dtype).to_vector<double>(), "non-root unchanged");
            }
          }
        }
      }
    });
  }
}

TEST(ProcessGroupGloo, ReduceScatterEveryOpAndDtype) {
  for (int size : {2, 3, 4}) {
    run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
      for (DType dtype : kDTypes) {
        for (ReduceOp op : ops_for(dtype)) {
          const int64_t n = 5;
          // inputs[j] holds elements [j*n, (j+1)*n) of the rank's sequence.
          std::vector<Tensor> inputs;
          for (int j = 0; j < size; ++j) inputs.push_back(make(r, n, dtype, j * n));
          Tensor out = zeros({n}, dtype);
          pg.reduce_scatter(out, inputs, op)->wait();
          expect_values(out, expected_reduce(size, n, dtype, op, r * n), label(dtype, op, size));
          // Inputs are left as they were.
          expect_values(inputs[0], make(r, n, dtype).to_vector<double>(), "inputs unchanged");
        }
      }
    });
  }
}

TEST(ProcessGroupGloo, AvgOfIntegersIsAnError) {
  run_ranks(2, [](ProcessGroupGloo& pg, int) {
    Tensor t = zeros({3}, kInt64);
    EXPECT_LOOM_ERROR(pg.all_reduce(t, ReduceOp::Avg), "avg", "floating", "int64");
    EXPECT_LOOM_ERROR(pg.reduce(t, 0, ReduceOp::Avg), "avg");
  });
}

// ---- data movement ---------------------------------------------------------------------

TEST(ProcessGroupGloo, BroadcastEveryRootAndDtype) {
  for (const Path& path : paths()) {
    SCOPED_TRACE(path.name);
    for (int size : {2, 3, 4}) {
      run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
        for (DType dtype : kDTypes) {
          for (int root = 0; root < size; ++root) {
            Tensor t = make(r, 50, dtype).view({5, 10});
            pg.broadcast(t, root)->wait();
            EXPECT_EQ(t.sizes(), (IntList{5, 10}));
            expect_values(t, make(root, 50, dtype).to_vector<double>(), "broadcast");
          }
        }
      }, path.options);
    }
  }
}

TEST(ProcessGroupGloo, AllGatherBothFormsEveryDtype) {
  for (const Path& path : paths()) {
    SCOPED_TRACE(path.name);
    for (int size : {2, 3, 4}) {
      run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
        for (DType dtype : kDTypes) {
          const int64_t n = 6;
          Tensor input = make(r, n, dtype);
          // Separate output tensors (through scratch) ...
          std::vector<Tensor> outputs;
          for (int j = 0; j < size; ++j) outputs.push_back(zeros({n}, dtype));
          pg.all_gather(outputs, input)->wait();
          for (int j = 0; j < size; ++j)
            expect_values(outputs[j], make(j, n, dtype).to_vector<double>(), "all_gather");
          // ... and chunks of one tensor (gathered in place).
          Tensor big = zeros({size * n}, dtype);
          std::vector<Tensor> chunks = big.chunk(size);
          pg.all_gather(chunks, input)->wait();
          Tensor into = zeros({size, n}, dtype);
          pg.all_gather_into_tensor(into, input)->wait();
          for (int j = 0; j < size; ++j) {
            expect_values(big.narrow(0, j * n, n), make(j, n, dtype).to_vector<double>(), "chunks");
            expect_values(into.select(0, j), make(j, n, dtype).to_vector<double>(), "into_tensor");
          }
        }
      }, path.options);
    }
  }
}

// Each size goes its own way: inside the check's 4 KiB record, as an
// all-gather after the check, or through gloo's algorithm (limits inclusive);
// issued back to back without waiting, they stay in order.
TEST(ProcessGroupGloo, SmallMessageLimitsAreInclusiveAndPathsInterleave) {
  for (bool check : {true, false}) {
    SCOPED_TRACE(check ? "check on" : "check off");
    run_ranks(3, [](ProcessGroupGloo& pg, int r) {
      std::vector<Tensor> ts;
      std::vector<WorkPtr> works;
      // float32: 4 KiB, 4 KiB + 4 bytes, 64 KiB, 64 KiB + 4 bytes, ...
      for (int64_t n : {1024, 1025, 16384, 16385, 1, 1024, 20000, 3}) {
        ts.push_back(make(r, n, kFloat32));
        works.push_back(pg.all_reduce(ts.back(), ReduceOp::Max));
      }
      Tensor b = make(r, 17, kInt64);
      works.push_back(pg.broadcast(b, 2));
      for (auto& w : works) w->wait();
      for (const Tensor& t : ts)
        expect_values(t, expected_reduce(3, t.numel(), kFloat32, ReduceOp::Max), "mixed sizes");
      expect_values(b, make(2, 17, kInt64).to_vector<double>(), "broadcast after");
    }, short_options().set_check_consistency(check));
  }
  // A limit below the record's payload area.
  run_ranks(2, [](ProcessGroupGloo& pg, int r) {
    for (int64_t n : {15, 16, 17}) {
      Tensor t = make(r, n, kFloat32);
      pg.all_reduce(t)->wait();
      expect_values(t, expected_reduce(2, n, kFloat32, ReduceOp::Sum), "64-byte limit");
    }
  }, short_options().set_small_message_bytes(64));
}

// Every rank folds the gathered values in rank order, so sums of floats that
// round differently in another order are still identical on every rank.
TEST(ProcessGroupGloo, SmallAllReduceIsBitIdenticalAcrossRanks) {
  run_ranks(3, [](ProcessGroupGloo& pg, int r) {
    Generator gen(100 + r);
    Tensor t = randn({257}, kFloat32, &gen) * std::pow(10.0, r * 3);
    pg.all_reduce(t, ReduceOp::Avg)->wait();
    // Every rank's result, copied bit for bit by an all-gather.
    std::vector<Tensor> all(3);
    for (auto& a : all) a = zeros({257}, kFloat32);
    pg.all_gather(all, t)->wait();
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(all[j].to_vector<float>(), t.to_vector<float>()) << "rank " << j << " vs " << r;
  });
}

TEST(ProcessGroupGloo, GatherAndScatterEveryRoot) {
  for (int size : {2, 3, 4}) {
    run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
      for (DType dtype : {kFloat32, kInt64, kBool}) {
        for (int root = 0; root < size; ++root) {
          const int64_t n = 4;
          std::vector<Tensor> outputs;
          if (r == root)
            for (int j = 0; j < size; ++j) outputs.push_back(zeros({n}, dtype));
          pg.gather(outputs, make(r, n, dtype), root)->wait();
          if (r == root)
            for (int j = 0; j < size; ++j)
              expect_values(outputs[j], make(j, n, dtype).to_vector<double>(), "gather");

          std::vector<Tensor> inputs;
          if (r == root)
            for (int j = 0; j < size; ++j) inputs.push_back(make(j + 10, n, dtype));
          Tensor out = zeros({n}, dtype);
          pg.scatter(out, inputs, root)->wait();
          expect_values(out, make(r + 10, n, dtype).to_vector<double>(), "scatter");
        }
      }
    });
  }
}

TEST(ProcessGroupGloo, AllToAllWithUnevenSizes) {
  for (int size : {2, 3, 4}) {
    run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
      // Rank i sends (i + j) % 3 elements (possibly none) with values 100*i+j to rank j.
      auto count = [](int i, int j) { return static_cast<int64_t>((i + j) % 3); };
      std::vector<Tensor> inputs, outputs;
      for (int j = 0; j < size; ++j) {
        inputs.push_back(full({count(r, j)}, 100.0 * r + j, kFloat64));
        outputs.push_back(zeros({count(j, r)}, kFloat64));
      }
      pg.all_to_all(outputs, inputs)->wait();
      for (int j = 0; j < size; ++j)
        expect_values(outputs[j], std::vector<double>(count(j, r), 100.0 * j + r), "all_to_all");
    });
  }
}

TEST(ProcessGroupGloo, BarrierAndSendRecvRing) {
  for (int size : {2, 3, 4}) {
    run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
      pg.barrier()->wait();
      // Every rank sends to the next and receives from the previous; both
      // are posted before either is waited on.
      Tensor out = full({3, 2}, static_cast<double>(r), kFloat32);
      Tensor in = zeros({3, 2}, kFloat32);
      auto s = pg.send(out, (r + 1) % size, 7);
      auto q = pg.recv(in, (r + size - 1) % size, 7);
      s->wait();
      q->wait();
      EXPECT_TRUE(s->is_success());
      expect_values(in, std::vector<double>(6, (r + size - 1) % size), "recv");
      // Two messages with the same tag arrive in order.
      if (r == 0) {
        pg.send(full({2}, 1.0, kInt32), 1, 3)->wait();
        pg.send(full({2}, 2.0, kInt32), 1, 3)->wait();
      } else if (r == 1) {
        Tensor a = zeros({2}, kInt32), b = zeros({2}, kInt32);
        auto wa = pg.recv(a, 0, 3);
        auto wb = pg.recv(b, 0, 3);
        wa->wait();
        wb->wait();
        expect_values(a, {1, 1}, "first");
        expect_values(b, {2, 2}, "second");
      }
      pg.barrier()->wait();
    });
  }
}

TEST(ProcessGroupGloo, MismatchedSendRecvIsAnErrorOnTheReceiver) {
  run_ranks(2, [](ProcessGroupGloo& pg, int r) {
    if (r == 0) {
      pg.send(full({5}, 1.0, kFloat32), 1)->wait();  // completes: the receiver drains it
      pg.send(full({2}, 4.0, kFloat32), 1)->wait();
    } else {
      Tensor small = zeros({3}, kFloat32);
      EXPECT_LOOM_ERROR(pg.recv(small, 0)->wait(), "rank 0 sent 5 float32", "does not match");
      Tensor ok = zeros({2}, kFloat32);
      pg.recv(ok, 0)->wait();
      expect_values(ok, {4, 4}, "after mismatch");
    }
  });
}

// Issued back to back without waiting: the broadcast must see the all-reduce's
// result (same memory), with one worker or two.
TEST(ProcessGroupGloo, CollectivesOnTheSameTensorRunInIssueOrder) {
  for (int threads : {1, 2, 3}) {
    run_ranks(
        3,
        [](ProcessGroupGloo& pg, int r) {
          Tensor t = full({1000}, static_cast<double>(r + 1), kFloat32);
          Tensor other = full({10}, 1.0, kFloat32);
          std::vector<WorkPtr> works;
          for (int k = 0; k < 4; ++k) {
            works.push_back(pg.all_reduce(t));
            works.push_back(pg.all_reduce(other));
          }
          works.push_back(pg.broadcast(t, 1));
          for (auto& w : works) w->wait();
          // (1+2+3) * 3^3 after four all-reduces.
          expect_values(t, std::vector<double>(1000, 6.0 * 27), "ordered");
          expect_values(other, std::vector<double>(10, 81.0), "other");
        },
        short_options(threads));
  }
}

TEST(ProcessGroupGloo, EmptyTensors) {
  for (int size : {2, 3}) {
    run_ranks(size, [size](ProcessGroupGloo& pg, int r) {
      Tensor e = zeros({0}, kFloat32);
      pg.all_reduce(e)->wait();
      pg.all_reduce(e, ReduceOp::Avg)->wait();
      pg.broadcast(e, 0)->wait();
      pg.reduce(e, 1)->wait();
      std::vector<Tensor> outs(size, zeros({0}, kFloat32));
      pg.all_gather(outs, e)->wait();
      Tensor into = zeros({0, 4}, kFloat32);
      pg.all_gather_into_tensor(into, zeros({0, 4}, kFloat32))->wait();
      pg.gather(outs, e, 0)->wait();
      pg.scatter(e, outs, 0)->wait();
      pg.reduce_scatter(e, outs)->wait();
      std::vector<Tensor> ins(size, zeros({0}, kFloat32)), outs2(size, zeros({0}, kFloat32));
      pg.all_to_all(outs2, ins)->wait();
      if (r == 0) pg.send(e, 1)->wait();
      if (r == 1) pg.recv(e, 0)->wait();
      // Still in step afterwards.
      Tensor t = full({3}, 1.0, kFloat32);
      pg.all_reduce(t)->wait();
      expect_values(t, std::vector<double>(3, size), "after empty");
    });
  }
}

TEST(ProcessGroupGloo, SixtyFourMiBAllReduce) {
  run_ranks(2, [](ProcessGroupGloo& pg, int r) {
    const int64_t n = 16 * 1024 * 1024;  // 64 MiB of float32
    Tensor t = full({n}, static_cast<double>(r + 1), kFloat32);
    float* p = t.data_ptr<float>();
    p[12345] = 10.0f * (r + 1);
    pg.all_reduce(t)->wait();
    EXPECT_EQ(p[0], 3.0f);
    EXPECT_EQ(p[12345], 30.0f);
    EXPECT_EQ(p[n / 2], 3.0f);
    EXPECT_EQ(p[n - 1], 3.0f);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += p[i] != (i == 12345 ? 30.0f : 3.0f);
    EXPECT_EQ(wrong, 0);
  });
}

TEST(ProcessGroupGloo, OneRank) {
  run_ranks(1, [](ProcessGroupGloo& pg, int) {
    Tensor t = full({4}, 2.0, kFloat32);
    pg.all_reduce(t, ReduceOp::Avg)->wait();
    pg.broadcast(t, 0)->wait();
    expect_values(t, std::vector<double>(4, 2.0), "one rank");
    std::vector<Tensor> outs{zeros({4}, kFloat32)};
    pg.all_gather(outs, t)->wait();
    expect_values(outs[0], std::vector<double>(4, 2.0), "all_gather");
    pg.barrier()->wait();
  });
}

// ---- argument errors ---------------------------------------------------------------------

TEST(ProcessGroupGloo, ArgumentErrorsAreThrownAtOnce) {
  run_ranks(2, [](ProcessGroupGloo& pg, int r) {
    Tensor nc = zeros({4, 3}, kFloat32).t();
    EXPECT_LOOM_ERROR(pg.all_reduce(nc), "all_reduce", "contiguous", "strides");
    Tensor t = zeros({4}, kFloat32);
    EXPECT_LOOM_ERROR(pg.broadcast(t, 2), "broadcast", "root must be in [0, 2)", "got 2");
    EXPECT_LOOM_ERROR(pg.reduce(t, -1), "root");
    std::vector<Tensor> three(3, zeros({4}, kFloat32));
    EXPECT_LOOM_ERROR(pg.all_gather(three, t), "all_gather", "expected 2 outputs", "got 3");
    std::vector<Tensor> wrong{zeros({4}, kFloat32), zeros({5}, kFloat32)};
    EXPECT_LOOM_ERROR(pg.all_gather(wrong, t), "outputs[1] has 5 elements");
    std::vector<Tensor> wrong_dtype{zeros({4}, kFloat32), zeros({4}, kInt32)};
    EXPECT_LOOM_ERROR(pg.reduce_scatter(t, wrong_dtype), "inputs[1] has dtype int32");
    Tensor out = zeros({7}, kFloat32);
    EXPECT_LOOM_ERROR(pg.all_gather_into_tensor(out, t), "2 * 4 = 8 elements", "got 7");
    std::vector<Tensor> none;
    if (r == 0) EXPECT_LOOM_ERROR(pg.gather(none, t, 0), "expected 2 outputs on the root");
    if (r == 0) EXPECT_LOOM_ERROR(pg.scatter(t, none, 0), "expected 2 inputs on the root");
    EXPECT_LOOM_ERROR(pg.send(t, r, 0), "dst must be another rank");
    EXPECT_LOOM_ERROR(pg.recv(t, 5, 0), "src must be another rank");
    EXPECT_LOOM_ERROR(pg.send(t, 1 - r, -3), "tag must be >= 0");
  });
}

TEST(ProcessGroupGloo, ConstructorArgumentErrors) {
  EXPECT_LOOM_ERROR(ProcessGroupGloo(std::make_shared<HashStore>(), 0, 1,
                                     short_options().set_small_message_bytes(size_t{17} << 20)),
                    "small_message_bytes must be at most 16 MiB", "got 17825792");
  auto store = std::make_shared<HashStore>();
  EXPECT_LOOM_ERROR(ProcessGroupGloo(nullptr, 0, 1), "store is null");
  EXPECT_LOOM_ERROR(ProcessGroupGloo(store, 2, 2), "rank must be in [0, 2)", "got 2");
  EXPECT_LOOM_ERROR(ProcessGroupGloo(store, 0, 0), "size must be >= 1");
  EXPECT_LOOM_ERROR(ProcessGroupGloo(store, 0, 1, short_options(0)), "threads");
  ProcessGroupGlooOptions bad_host = short_options();
  bad_host.interface_or_host = "no-such-host.invalid";
  EXPECT_LOOM_ERROR(ProcessGroupGloo(store, 0, 1, bad_host), "no-such-host.invalid");
}

TEST(ProcessGroupGloo, InterfaceByNameOptionOrEnvironment) {
  ProcessGroupGlooOptions by_name = short_options();
  by_name.interface_or_host = "lo";
  run_ranks(2, [](ProcessGroupGloo& pg, int r) {
    Tensor t = full({3}, static_cast<double>(r), kFloat64);
    pg.all_reduce(t)->wait();
    expect_values(t, {1, 1, 1}, "over lo");
  }, by_name);
  ::setenv("LOOM_GLOO_SOCKET_IFNAME", "lo", 1);
  run_ranks(2, [](ProcessGroupGloo& pg, int) {
    Tensor t = full({3}, 2.0, kFloat64);
    pg.all_reduce(t, ReduceOp::Max)->wait();
    expect_values(t, {2, 2, 2}, "env interface");
  });
  ::setenv("LOOM_GLOO_SOCKET_IFNAME", "nosuchif9", 1);
  EXPECT_LOOM_ERROR(ProcessGroupGloo(std::make_shared<HashStore>(), 0, 1),
                    "LOOM_GLOO_SOCKET_IFNAME='nosuchif9' is not a network interface");
  ::unsetenv("LOOM_GLOO_SOCKET_IFNAME");
}

TEST(ProcessGroupGloo, RendezvousTimeoutNamesTheRank) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(milliseconds(500));
  // Rank 1 of 2 never comes.
  EXPECT_LOOM_ERROR(ProcessGroupGloo(store, 0, 2, short_options(1, milliseconds(500))), "rank 0 of 2",
                    "could not connect");
}

// ---- mismatched ranks, timeouts ---------------------------------------------------------------

TEST(ProcessGroupGloo, MismatchedShapesAreAnErrorNotAHangOrAbort) {
  run_ranks(3, [](ProcessGroupGloo& pg, int r) {
    Tensor t = zeros({r == 2 ? 20 : 10}, kFloat32);
    EXPECT_LOOM_ERROR(pg.all_reduce(t)->wait(), "ranks disagree", "rank 0 issued all_reduce (sum) of 10 float32",
                      "rank 2 issued all_reduce (sum) of 20 float32");
    // Different collectives.
    Tensor u = full({4}, 1.0, kFloat32);
    auto w = r == 1 ? pg.broadcast(u, 0) : pg.all_reduce(u);
    EXPECT_LOOM_ERROR(w->wait(), "rank 1 issued broadcast");
    // Different dtypes.
    Tensor v = zeros({4}, r == 0 ? kFloat32 : kInt32);
    EXPECT_LOOM_ERROR(pg.all_reduce(v)->wait(), "int32", "float32");
    // all_to_all sizes that do not pair up.
    std::vector<Tensor> ins(3, zeros({2}, kFloat32)), outs(3, zeros({2}, kFloat32));
    if (r == 1) outs[0] = zeros({3}, kFloat32);
    EXPECT_LOOM_ERROR(pg.all_to_all(outs, ins)->wait(), "rank 0 sends 2 elements to rank 1",
                      "expects 3");
    // One rank's tensor over the small-message limit, the others' under it:
    // still a mismatch error on every rank (the check comes first).
    Tensor big = zeros({r == 1 ? 100000 : 10}, kFloat32);
    EXPECT_LOOM_ERROR(pg.all_reduce(big)->wait(), "ranks disagree",
                      "rank 1 issued all_reduce (sum) of 100000 float32");
    // The group is still usable: nothing was sent.
    EXPECT_FALSE(pg.is_broken());
    Tensor ok = full({5}, 1.0, kFloat32);
    pg.all_reduce(ok)->wait();
    expect_values(ok, std::vector<double>(5, 3.0), "after mismatches");
  });
}

TEST(ProcessGroupGloo, SkippedAllReduceTimesOutWithAClearMessage) {
  // Ranks coordinate through a promise; the multiprocess suite
  // (process_group_gloo_multiprocess_test) covers dead and silent peers.
  if (kRanksAreProcesses) GTEST_SKIP() << "needs ranks as threads";
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  run_ranks(
      2,
      [&](ProcessGroupGloo& pg, int r) {
        if (r == 1) {
          done.wait_for(std::chrono::seconds(10));  // skips the all_reduce, stays connected
          return;
        }
        Tensor t = zeros({1024}, kFloat32);
        const auto start = std::chrono::steady_clock::now();
        auto work = pg.all_reduce(t);
        EXPECT_LOOM_ERROR(work->wait(), "all_reduce (sum) of 1024 float32 on rank 0 of 2",
                          "timed out after 1000 ms");
        const auto elapsed = std::chrono::steady_clock::now() - start;
        EXPECT_GE(elapsed, milliseconds(900));
        EXPECT_LT(elapsed, milliseconds(4000));
        EXPECT_TRUE(work->is_completed());
        EXPECT_FALSE(work->is_success());
        // The group is broken now: later collectives fail fast, saying so.
        EXPECT_TRUE(pg.is_broken());
        const auto again = std::chrono::steady_clock::now();
        EXPECT_LOOM_ERROR(pg.broadcast(t, 0)->wait(), "broken", "timed out");
        EXPECT_LOOM_ERROR(pg.send(t, 1)->wait(), "broken");
        EXPECT_LT(std::chrono::steady_clock::now() - again, milliseconds(500));
        rank0_done.set_value();
      },
      short_options(2, milliseconds(1000)));
}

TEST(ProcessGroupGloo, UnmatchedRecvTimesOut) {
  if (kRanksAreProcesses) GTEST_SKIP() << "needs ranks as threads";
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  run_ranks(
      2,
      [&](ProcessGroupGloo& pg, int r) {
        if (r == 1) {
          done.wait_for(std::chrono::seconds(10));
          return;
        }
        Tensor t = zeros({8}, kInt64);
        EXPECT_LOOM_ERROR(pg.recv(t, 1, 4)->wait(),
                          "recv of 8 int64 from rank 1 with tag 4 on rank 0 of 2",
                          "timed out after 800 ms");
        rank0_done.set_value();
      },
      short_options(1, milliseconds(800)));
}

// This process's threads: (thread id, name), from /proc/self/task.
std::vector<std::pair<pid_t, std::string>> process_threads() {
  std::vector<std::pair<pid_t, std::string>> threads;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name))
      threads.emplace_back(std::stoi(task.path().filename().string()), name);
  }
  return threads;
}

// Its threads carry names (top -H, perf, gdb): the workers and Gloo's
// transport loop.
TEST(ProcessGroupGloo, ThreadsAreNamed) {
  run_ranks(2, [](ProcessGroupGloo&, int) {
    std::set<std::string> names;
    for (const auto& thread : process_threads()) names.insert(thread.second);
    EXPECT_EQ(names.count("loom-gloo-0"), 1u);
    EXPECT_EQ(names.count("loom-gloo-net"), 1u);
  });
}

// The transport loop thread (loom-gloo-net) runs under SCHED_BATCH unless
// the option says otherwise; the constructing thread keeps its policy.
std::vector<int> transport_thread_policies() {
  std::vector<int> policies;
  for (const auto& [tid, name] : process_threads())
    if (name == "loom-gloo-net") policies.push_back(sched_getscheduler(tid));
  return policies;
}

TEST(ProcessGroupGloo, TransportThreadIsBatchScheduled) {
  run_ranks(2, [](ProcessGroupGloo& pg, int) {
    EXPECT_TRUE(pg.options().batch_transport_thread);
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    const std::vector<int> policies = transport_thread_policies();
    ASSERT_FALSE(policies.empty());
    for (int policy : policies) EXPECT_EQ(policy, SCHED_BATCH);
  });
}

TEST(ProcessGroupGloo, TransportThreadKeepsTheDefaultPolicyWhenAsked) {
  run_ranks(
      2,
      [](ProcessGroupGloo&, int) {
        const std::vector<int> policies = transport_thread_policies();
        ASSERT_FALSE(policies.empty());
        for (int policy : policies) EXPECT_EQ(policy, SCHED_OTHER);
      },
      short_options().set_batch_transport_thread(false));
}

}  // namespace
}  // namespace distributed
}  // namespace loom
