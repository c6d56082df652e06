// hvd's tensor operations on 2 and 3 forked ranks: allreduce (every op,
// fused, scaled, in place, async), allgather (uneven rows), broadcast,
// alltoall (even and with splits), matching by name whatever the order,
// errors when ranks disagree or only some submit (no hang), join (zeros,
// last rank), handles, argument errors, compression.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "tests/distributed/horovod/HvdRanks.h"

namespace loom {
namespace {

using testing::expect_error;
using testing::run_hvd_ranks;

// Every element of t equals v (within 1e-6), else throws naming `what`.
void check_all(const Tensor& t, double v, const std::string& what) {
  for (double x : t.to_vector<double>())
    LOOM_CHECK(std::abs(x - v) <= 1e-6 * std::max(1.0, std::abs(v)), what, ": expected every element to be ", v,
               ", got ", x, " in ", t.describe());
}

TEST(HvdBasics, RankSizeLocalRankAndErrorsBeforeInit) {
  // Before init: errors, in a child (no tensor work in the parent).
  distributed::spawn(
      [](int) {
        LOOM_CHECK(!hvd::is_initialized(), "initialised too early");
        expect_error([] { hvd::rank(); }, {"hvd::rank", "call hvd::init() first"}, "rank before init");
        expect_error([] { hvd::size(); }, {"hvd::size", "hvd::init()"}, "size before init");
        expect_error([] { hvd::join(); }, {"hvd::join", "hvd::init()"}, "join before init");
        Tensor t = ones({2});
        expect_error([&] { hvd::allreduce(t); }, {"hvd::allreduce", "hvd::init()"}, "allreduce before init");
        nn::Linear model(2, 2);
        optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
        expect_error([&] { hvd::DistributedOptimizer opt(sgd, model->named_parameters()); },
                     {"hvd::DistributedOptimizer", "hvd::init()"}, "DistributedOptimizer before init");
        hvd::shutdown();  // not initialised: nothing to do
      },
      1);
  for (int world : {2, 3}) {
    run_hvd_ranks(world, [world](int rank) {
      LOOM_CHECK(hvd::is_initialized(), "not initialised");
      LOOM_CHECK(hvd::rank() == rank && hvd::size() == world, "rank ", hvd::rank(), " size ", hvd::size());
      // spawn sets LOCAL_RANK and LOCAL_WORLD_SIZE like loomrun.
      LOOM_CHECK(hvd::local_rank() == rank && hvd::local_size() == world, "local rank ", hvd::local_rank(),
                 " local size ", hvd::local_size());
      LOOM_CHECK(hvd::fusion_threshold() == int64_t(128) << 20, "default fusion threshold ",
                 hvd::fusion_threshold());
      hvd::init();  // a second init does nothing
      LOOM_CHECK(hvd::size() == world, "size changed");
    });
  }
}

TEST(HvdOps, AllreduceEveryOpFusedScaledInPlaceAndAsync) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [world](int rank) {
      const double r1 = rank + 1, n = world;
      const double sum = n * (n + 1) / 2;
      check_all(hvd::allreduce(full({2, 3}, r1)), sum / n, "average");
      check_all(hvd::allreduce(full({5}, int64_t(rank + 1), kInt64), "ints", hvd::Sum), sum, "int sum");
      check_all(hvd::allreduce(full({4}, r1), "min", hvd::Min), 1, "min");
      check_all(hvd::allreduce(full({4}, r1), "max", hvd::Max), n, "max");
      check_all(hvd::allreduce(full({4}, r1), "product", hvd::Product), n == 2 ? 2 : 6, "product");
      check_all(hvd::allreduce(full({3}, r1), "scaled", hvd::Sum, hvd::Compression::none, 2.0, 0.25), sum / 2,
                "prescale 2, postscale 0.25");
      Tensor in_place = full({7}, r1);
      Tensor& same = hvd::allreduce_(in_place, "in place");
      LOOM_CHECK(&same == &in_place, "allreduce_ must return its argument");
      check_all(in_place, sum / n, "in place");
      // The input of the out-of-place form is left alone.
      Tensor kept = full({2}, r1);
      hvd::allreduce(kept, "kept");
      check_all(kept, r1, "out-of-place input");

      // Many small tensors in flight at once: fused; odd ranks submit them in
      // reverse order (matched by name).
      const int count = 40;
      std::vector<Tensor> tensors(count);
      std::vector<hvd::Handle> handles(count);
      for (int k = 0; k < count; ++k) {
        const int i = rank % 2 ? count - 1 - k : k;
        tensors[i] = full({i + 1}, r1 * i);
        handles[i] = hvd::allreduce_async_(tensors[i], "small." + std::to_string(i), hvd::Sum);
      }
      for (int i = 0; i < count; ++i) {
        Tensor out = hvd::synchronize(handles[i]);
        LOOM_CHECK(out.is_same(tensors[i]), "the in-place async result must be the tensor itself");
        check_all(out, sum * i, "small." + std::to_string(i));
        check_all(hvd::synchronize(handles[i]), sum * i, "synchronized twice");
        LOOM_CHECK(hvd::poll(handles[i]), "poll after synchronize");
      }
      // Unnamed operations, in the same order everywhere.
      hvd::Handle a = hvd::allreduce_async(full({1}, r1));
      hvd::Handle b = hvd::allreduce_async(full({2}, 2 * r1), "", hvd::Sum);
      LOOM_CHECK(a.name() == "allreduce.noname." + std::to_string(1) || a.name().rfind("allreduce.noname.", 0) == 0,
                 "unnamed: ", a.name());
      check_all(hvd::synchronize(b), 2 * sum, "unnamed sum");
      check_all(hvd::synchronize(a), sum / n, "unnamed average");
    });
  }
}

TEST(HvdOps, TensorsReadyWithinACycleFuseIntoOneCollectiveUpToTheThreshold) {
  for (int64_t threshold : {int64_t(-1), int64_t(0), int64_t(400)}) {
    SCOPED_TRACE(threshold);
    hvd::InitOptions options;
    options.cycle_time_ms = 500;  // every tensor below is queued within the first cycle
    options.fusion_threshold_bytes = threshold;
    run_hvd_ranks(2, [threshold](int rank) {
      const hvd::Stats before = hvd::stats();
      std::vector<Tensor> tensors;
      std::vector<hvd::Handle> handles;
      for (int i = 0; i < 40; ++i) {  // 40 x 10 floats = 40 x 40 bytes
        tensors.push_back(full({10}, double(rank + i)));
        handles.push_back(hvd::allreduce_async_(tensors.back(), "t" + std::to_string(i), hvd::Sum));
      }
      for (int i = 0; i < 40; ++i) check_all(hvd::synchronize(handles[i]), 2.0 * i + 1, "fused sum");
      const hvd::Stats after = hvd::stats();
      const int64_t ops = after.fused_operations - before.fused_operations;
      // Default 128 MiB: one collective; 0: none fused; 400 bytes: 10 tensors each.
      const int64_t expected = threshold < 0 ? 1 : threshold == 0 ? 40 : 4;
      LOOM_CHECK(ops == expected, "threshold ", threshold, ": ", ops, " collectives for 40 tensors, expected ",
                 expected);
      LOOM_CHECK(after.tensors - before.tensors == 40 && after.submitted - before.submitted == 40, "counts: ",
                 after.tensors - before.tensors, " tensors, ", after.submitted - before.submitted, " submitted");
      LOOM_CHECK(after.rounds - before.rounds == 1, after.rounds - before.rounds, " negotiation rounds");
    }, options);
  }
}

TEST(HvdOps, ManyMoreTensorsThanARecordHoldsMatchInOppositeOrders) {
  hvd::InitOptions options;
  options.cycle_time_ms = 200;       // everything is queued before the first round
  options.stall_shutdown_time_s = 20;
  run_hvd_ranks(2, [](int rank) {
    // Rank 0 queues a0..a69 then b0..b69; rank 1 the b's first: the first
    // 64 of each rank's queue have no name in common.
    std::vector<std::string> names;
    for (const char* group : {"a", "b"})
      for (int i = 0; i < 70; ++i) names.push_back(group + std::to_string(i));
    if (rank == 1) std::rotate(names.begin(), names.begin() + 70, names.end());
    std::vector<hvd::Handle> handles;
    for (const std::string& name : names) handles.push_back(hvd::allreduce_async(full({2}, 1.0), name, hvd::Sum));
    for (const hvd::Handle& h : handles) check_all(hvd::synchronize(h), 2, h.name());
  }, options);
}

TEST(HvdOps, AllgatherConcatenatesUnevenRowsInRankOrder) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [world](int rank) {
      // Rank r sends r + 1 rows of 2 (rank 0: one row), each row filled with r.
      Tensor mine = full({rank + 1, 2}, double(rank));
      Tensor all = hvd::allgather(mine, "rows");
      const int64_t rows = int64_t(world) * (world + 1) / 2;
      LOOM_CHECK(all.sizes() == IntList({rows, 2}), "gathered ", all.describe());
      const auto v = all.to_vector<float>();
      int64_t at = 0;
      for (int r = 0; r < world; ++r)
        for (int k = 0; k < (r + 1) * 2; ++k, ++at)
          LOOM_CHECK(v[at] == float(r), "row element ", at, " is ", v[at], ", expected ", r);
      // A rank with no rows, int64, async, 3-d rows.
      Tensor some = rank == 0 ? zeros({0, 2, 2}, kInt64) : full({1, 2, 2}, int64_t(rank), kInt64);
      Tensor got = hvd::synchronize(hvd::allgather_async(some));
      LOOM_CHECK(got.sizes() == IntList({world - 1, 2, 2}) && got.dtype() == kInt64, "gathered ", got.describe());
      for (int r = 1; r < world; ++r) check_all(got.select(0, r - 1), r, "int rows");
    });
  }
}

TEST(HvdOps, BroadcastFromAnyRootInPlaceOrNot) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [](int rank) {
      Tensor t = full({3, 2}, double(rank + 10));
      Tensor out = hvd::broadcast(t, 1, "b");
      check_all(out, 11, "broadcast from 1");
      check_all(t, rank + 10, "broadcast leaves its input");
      hvd::broadcast_(t, 0, "b_");
      check_all(t, 10, "in-place broadcast from 0");
      Tensor ints = full({4}, int64_t(rank), kInt64);
      hvd::synchronize(hvd::broadcast_async_(ints, hvd::size() - 1, "ints"));
      check_all(ints, hvd::size() - 1, "broadcast from the last rank");
    });
  }
}

TEST(HvdOps, AlltoallEvenAndWithSplits) {
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    run_hvd_ranks(world, [world](int rank) {
      // Even: 2 rows per destination; row value = 100 * sender + destination.
      Tensor even = empty({2 * world, 3});
      for (int j = 0; j < world; ++j) even.narrow(0, 2 * j, 2).fill_(100.0 * rank + j);
      hvd::AlltoallResult r = hvd::alltoall(even, {}, "even");
      LOOM_CHECK(r.output.sizes() == IntList({2 * world, 3}), "even output ", r.output.describe());
      LOOM_CHECK(r.received_splits == std::vector<int64_t>(world, 2), "even splits");
      for (int from = 0; from < world; ++from)
        check_all(r.output.narrow(0, 2 * from, 2), 100.0 * from + rank, "even rows from " + std::to_string(from));
      // Splits: rank r sends j + 1 rows to rank j; receives rank + 1 rows from everyone.
      std::vector<int64_t> splits;
      int64_t rows = 0;
      for (int j = 0; j < world; ++j) {
        splits.push_back(j + 1);
        rows += j + 1;
      }
      Tensor uneven = empty({rows}, kInt64);
      int64_t at = 0;
      for (int j = 0; j < world; ++j) {
        uneven.narrow(0, at, j + 1).fill_(int64_t(10 * rank + j));
        at += j + 1;
      }
      hvd::Handle h = hvd::alltoall_async(uneven, splits, "uneven");
      Tensor got = hvd::synchronize(h);
      LOOM_CHECK(hvd::received_splits(h) == std::vector<int64_t>(world, rank + 1), "uneven splits");
      LOOM_CHECK(got.sizes() == IntList({int64_t(world) * (rank + 1)}), "uneven output ", got.describe());
      for (int from = 0; from < world; ++from)
        check_all(got.narrow(0, from * (rank + 1), rank + 1), 10 * from + rank, "uneven from " + std::to_string(from));
      // Nothing to some ranks.
      std::vector<int64_t> only_to_0(world, 0);
      only_to_0[0] = 1;
      hvd::AlltoallResult z = hvd::alltoall(full({1, 2}, double(rank)), only_to_0, "to 0");
      LOOM_CHECK(z.output.size(0) == (rank == 0 ? world : 0), "to 0: ", z.output.describe());
    });
  }
}

TEST(HvdOps, RanksThatDisagreeAllGetAnErrorAndHvdGoesOn) {
  run_hvd_ranks(3, [](int rank) {
    expect_error([&] { hvd::allreduce(ones({3 + rank}), "w"); },
                 {"ranks disagree on 'w'", "rank 0 submitted an allreduce (avg) of 3 float32 elements",
                  "rank 1 submitted an allreduce (avg) of 4"},
                 "different sizes");
    expect_error([&] { hvd::allreduce(ones({6}).view(rank ? IntList{2, 3} : IntList{3, 2}), "shape"); },
                 {"ranks disagree on 'shape'", "different shapes"}, "different shapes");
    expect_error([&] { hvd::broadcast(ones({2}), rank == 2 ? 1 : 0, "root"); },
                 {"ranks disagree on 'root'", "from root 0", "from root 1"}, "different roots");
    check_all(hvd::allreduce(full({2}, 1.0), "after", hvd::Sum), 3, "hvd still works");
  });
}

TEST(HvdOps, AnOperationOnlySomeRanksSubmitFailsAfterTheStallTimeoutInsteadOfHanging) {
  hvd::InitOptions options;
  options.stall_check_time_s = 0.2;
  options.stall_shutdown_time_s = 1.0;
  run_hvd_ranks(2, [](int rank) {
    const auto start = std::chrono::steady_clock::now();
    const std::string name = "only_on_" + std::to_string(rank);
    expect_error([&] { hvd::allreduce(ones({2}), name); },
                 {"'" + name + "'", "was submitted on rank " + std::to_string(rank),
                  "not by rank(s) [" + std::to_string(1 - rank) + "]", "stall timeout of 1 s"},
                 "submitted by one rank");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    LOOM_CHECK(s < 15, "the stall took ", s, " s to fail");
    check_all(hvd::allreduce(full({2}, 1.0), "after", hvd::Sum), 2, "hvd still works");
  }, options);
}

TEST(HvdOps, JoinedRanksContributeZerosAndJoinReturnsTheLastRank) {
  run_hvd_ranks(2, [](int rank) {
    if (rank == 1) {
      LOOM_CHECK(hvd::join() == 0, "rank 0 joins last");
    } else {
      check_all(hvd::allreduce(full({3}, 4.0), "avg"), 2, "average with a joined rank (zero padded, / 2)");
      check_all(hvd::allreduce(full({3}, 4.0), "sum", hvd::Sum), 4, "sum with a joined rank");
      check_all(hvd::allreduce(full({3}, 4.0), "min", hvd::Min), 4, "min with a joined rank");
      check_all(hvd::allreduce(full({3}, 4.0), "max", hvd::Max), 4, "max with a joined rank");
      Tensor rows = hvd::allgather(full({2, 2}, 7.0), "gather");
      LOOM_CHECK(rows.sizes() == IntList({2, 2}), "a joined rank gives no rows: ", rows.describe());
      check_all(hvd::alltoall(full({2}, 5.0), {1, 1}, "a2a").output, 5, "alltoall with a joined rank");
      expect_error([] { hvd::broadcast(ones({2}), 1, "from joined"); },
                   {"'from joined'", "root rank 1 has already joined"}, "broadcast from a joined root");
      LOOM_CHECK(hvd::join() == 0, "rank 0 joins last");
    }
    // Everyone is back: reductions count every rank again.
    check_all(hvd::allreduce(full({1}, 1.0 + rank)), 1.5, "after join");
  });
  run_hvd_ranks(3, [](int rank) {
    // Rank 0 joins at once, rank 2 after one reduction, rank 1 after two.
    if (rank != 0) check_all(hvd::allreduce(full({2}, 1.0 + rank), "one"), (2.0 + 3.0) / 3, "one");
    if (rank == 1) check_all(hvd::allreduce(full({2}, 2.0), "two"), 2.0 / 3, "two");
    const int last = hvd::join();
    LOOM_CHECK(last == 1, "rank 1 joined last, join returned ", last);
  });
}

TEST(HvdOps, HandlesPollSynchronizeAndArgumentErrors) {
  run_hvd_ranks(2, [](int rank) {
    hvd::Handle h = hvd::allreduce_async(full({1000}, 1.0 + rank), "polled");
    while (!hvd::poll(h)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    check_all(hvd::synchronize(h), 1.5, "polled");
    expect_error([] { hvd::synchronize(hvd::Handle()); }, {"hvd::synchronize", "undefined"}, "empty handle");
    expect_error([] { hvd::poll(hvd::Handle()); }, {"hvd::poll", "undefined"}, "empty handle");
    expect_error([&] { hvd::received_splits(h); }, {"'polled' is an allreduce"}, "splits of an allreduce");
    // Pending names are unique.
    hvd::Handle first = hvd::allreduce_async(ones({1}), "dup");
    expect_error([] { hvd::allreduce_async(ones({1}), "dup"); }, {"'dup' is already waiting"}, "duplicate");
    hvd::synchronize(first);
    // Arguments.
    expect_error([] { hvd::allreduce(Tensor()); }, {"hvd::allreduce", "undefined"}, "undefined tensor");
    expect_error([] { hvd::allreduce(ones({2}, kInt64)); }, {"op Average needs a floating-point tensor", "int64",
                                                             "hvd::Sum"}, "integer average");
    expect_error([] { hvd::allreduce(ones({2}, kInt64), "", hvd::Sum, hvd::Compression::none, 2.0); },
                 {"prescale/postscale", "floating-point"}, "integer prescale");
    expect_error([] { hvd::broadcast(ones({2}), 2); }, {"root_rank must be in [0, size() = 2)", "got 2"},
                 "bad root");
    expect_error([] { hvd::allgather(scalar_tensor(1.0)); }, {"hvd::allgather", "0-dim"}, "0-dim gather");
    expect_error([] { hvd::alltoall(ones({3})); }, {"dim 0 of the tensor (3) is not divisible by size() = 2"},
                 "uneven alltoall");
    expect_error([] { hvd::alltoall(ones({3}), {1, 1}); }, {"splits sum to 2 rows but dim 0 of the tensor is 3"},
                 "bad splits");
    expect_error([] { hvd::alltoall(ones({3}), {3}); }, {"splits must have size() = 2 entries"}, "short splits");
    expect_error([] { hvd::alltoall(ones({3}), {4, -1}); }, {"splits[1] must be >= 0"}, "negative split");
  });
}

// Sends float32 as float64 on the wire (counts its calls).
std::atomic<int> compress_calls{0};
class WideCompressor : public hvd::Compressor {
 public:
  Tensor compress(const Tensor& t) const override {
    ++compress_calls;
    return t.to(kFloat64);
  }
  Tensor decompress(const Tensor& wire, DType original) const override { return wire.to(original); }
  std::string name() const override { return "wide"; }
};

TEST(HvdOps, ACompressorDecidesWhatTravels) {
  run_hvd_ranks(2, [](int rank) {
    auto wide = std::make_shared<WideCompressor>();
    Tensor out = hvd::allreduce(full({4}, 1.0 + rank), "wide", hvd::Average, wide);
    LOOM_CHECK(out.dtype() == kFloat32, "decompressed to ", out.describe());
    check_all(out, 1.5, "compressed average");
    Tensor t = full({4}, 1.0 + rank);
    hvd::allreduce_(t, "wide_", hvd::Sum, wide);
    check_all(t, 3, "compressed in-place sum");
    LOOM_CHECK(compress_calls == 2, "compress called ", compress_calls.load(), " times");
    expect_error([] { hvd::allreduce(ones({1}), "", hvd::Average, nullptr); }, {"compression is null"}, "null");
  });
}

TEST(HvdOps, Fp16AndBf16CompressionRoundOnTheWire) {
  run_hvd_ranks(2, [](int rank) {
    // 1 + 2^-12 is not a float16 (it rounds to 1): the float32 sum of the
    // two ranks' values would be 3.000244, the float16 wire gives 3.
    const double v = rank == 0 ? 1.0 + 1.0 / 4096 : 2.0;
    Tensor fp16 = hvd::allreduce(full({5}, v), "fp16", hvd::Sum, hvd::Compression::fp16);
    LOOM_CHECK(fp16.dtype() == kFloat32, "decompressed to ", fp16.describe());
    check_all(fp16, 3.0, "fp16 sum");
    Tensor bf16 = hvd::allreduce(full({5}, 1000.0 + rank), "bf16", hvd::Average,
                                 hvd::Compression::bf16);
    check_all(bf16, 1000.0, "bf16 average (1000.5 is not a bfloat16)");
    // Integers travel unchanged.
    Tensor ints = hvd::allreduce(full({2}, 1 + rank, TensorOptions(kInt64)), "ints", hvd::Sum,
                                 hvd::Compression::fp16);
    LOOM_CHECK(ints.dtype() == kInt64, "integers changed dtype: ", ints.describe());
    check_all(ints, 3, "integer sum");
    LOOM_CHECK(hvd::Compression::fp16->name() == "fp16", "name");
  });
}

}  // namespace
}  // namespace loom
