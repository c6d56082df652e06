// The CUDA emulator's NCCL (tools/cuda/emu/src/Nccl*.cpp) on its CUDA runtime,
// with three emulated devices (LOOM_CUDA_EMU_DEVICES=3, set in BUILD).
//
// Groups of 1, 2 and 3 ranks, one host thread, device and stream per rank (as
// loom's distributed tests run them): every collective and send/receive, every
// reduction op, integer / float / float16 / bfloat16 data, exact values on
// every rank; groups (loom's all_gather and all_to_all); the non-blocking init
// loom uses (distributed/nccl/NcclState.h); stream order (a collective waits
// for every rank's stream to reach it); capture into a graph and replay; a
// peer that never comes (in progress until aborted); an abort waking a peer
// that waits (ncclRemoteError); mismatched calls (ncclInvalidUsage on every
// rank, no hang); two ranks on one device refused; and every argument check.
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/tools/cuda_emu/EmuTestUtil.h"
#include "tools/cuda/emu/src/HostMath.h"

inline void PrintTo(ncclResult_t result, std::ostream* os) {
  *os << ncclGetErrorString(result) << " (" << static_cast<int>(result) << ")";
}

namespace {

using emu_test::DeviceBuffer;
using emu_test::Stream;
using emu_test::StreamGate;

// Runs fn(rank) on `world` host threads, rank r on device r.
void ranks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&fn, r] {
      ASSERT_EQ(cudaSuccess, cudaSetDevice(r));
      fn(r);
    });
  for (auto& t : threads) t.join();
}

// loom's way (distributed/nccl/NcclState.h): a non-blocking init, polled
// until ready, failed or past the deadline.
ncclResult_t init_like_loom(ncclComm_t* comm, int world, const ncclUniqueId& id, int rank,
                            std::chrono::milliseconds timeout) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t result = ncclCommInitRankConfig(comm, world, id, rank, &config);
  if (result != ncclInProgress && result != ncclSuccess) return result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    if (ncclCommGetAsyncError(*comm, &state) != ncclSuccess) return ncclInternalError;
    if (state != ncclInProgress || std::chrono::steady_clock::now() >= deadline) return state;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ncclUniqueId new_id() {
  ncclUniqueId id;
  EXPECT_EQ(ncclSuccess, ncclGetUniqueId(&id));
  return id;
}

// Rank r's i-th input: multiples of 1/2, so sums, products and averages
// over up to three ranks are exact in every type used.
double value(int rank, int i) { return 0.5 * (rank + 1) + (i % 5) - 1.0; }

double reduce(ncclRedOp_t op, int world, int i) {
  double acc = value(0, i);
  for (int r = 1; r < world; ++r) {
    const double x = value(r, i);
    acc = op == ncclProd  ? acc * x
          : op == ncclMax ? std::max(acc, x)
          : op == ncclMin ? std::min(acc, x)
                          : acc + x;
  }
  return op == ncclAvg ? acc / world : acc;
}

class NcclCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(NcclCollectivesTest, EveryCollectiveGivesEveryRankTheExactResult) {
  const int world = GetParam(), n = 7;
  const ncclUniqueId id = new_id();
  ranks(world, [&](int rank) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclSuccess, init_like_loom(&comm, world, id, rank, std::chrono::seconds(20)))
        << "rank " << rank;
    Stream stream;
    const auto sync = [&] { ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream)); };
    int count = 0, user = -1, device = -1;
    EXPECT_EQ(ncclSuccess, ncclCommCount(comm, &count));
    EXPECT_EQ(world, count);
    EXPECT_EQ(ncclSuccess, ncclCommUserRank(comm, &user));
    EXPECT_EQ(rank, user);
    EXPECT_EQ(ncclSuccess, ncclCommCuDevice(comm, &device));
    EXPECT_EQ(rank, device);

    // All-reduce, every op, float32 in place.
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
      std::vector<float> t(n);
      for (int i = 0; i < n; ++i) t[i] = static_cast<float>(value(rank, i));
      DeviceBuffer<float> d(t);
      ASSERT_EQ(ncclSuccess, ncclAllReduce(d.get(), d.get(), n, ncclFloat32, op, comm, stream));
      sync();
      t = d.download();
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(static_cast<float>(reduce(op, world, i)), t[i])
            << "op " << op << " rank " << rank << " element " << i;
    }
    // int32 sum out of place; uint8 max (loom's bool "any").
    {
      std::vector<int32_t> s(n);
      for (int i = 0; i < n; ++i) s[i] = rank * 10 + i;
      DeviceBuffer<int32_t> ds(s), dr(n);
      DeviceBuffer<uint8_t> flag(std::vector<uint8_t>{static_cast<uint8_t>(rank == world - 1)});
      ASSERT_EQ(ncclSuccess,
                ncclAllReduce(ds.get(), dr.get(), n, ncclInt32, ncclSum, comm, stream));
      ASSERT_EQ(ncclSuccess,
                ncclAllReduce(flag.get(), flag.get(), 1, ncclUint8, ncclMax, comm, stream));
      sync();
      const std::vector<int32_t> r = dr.download();
      for (int i = 0; i < n; ++i) EXPECT_EQ(10 * world * (world - 1) / 2 + world * i, r[i]);
      EXPECT_EQ(1, flag.download()[0]);
    }
    // float16 and bfloat16 sums.
    {
      std::vector<uint16_t> h(n), bf(n);
      for (int i = 0; i < n; ++i) {
        h[i] = loom_emu::libs::float_to_half(static_cast<float>(value(rank, i)));
        bf[i] = loom_emu::libs::float_to_bf16(static_cast<float>(value(rank, i)));
      }
      DeviceBuffer<uint16_t> dh(h), dbf(bf);
      ASSERT_EQ(ncclSuccess,
                ncclAllReduce(dh.get(), dh.get(), n, ncclFloat16, ncclSum, comm, stream));
      ASSERT_EQ(ncclSuccess,
                ncclAllReduce(dbf.get(), dbf.get(), n, ncclBfloat16, ncclSum, comm, stream));
      sync();
      h = dh.download();
      bf = dbf.download();
      for (int i = 0; i < n; ++i) {
        const float want = static_cast<float>(reduce(ncclSum, world, i));
        EXPECT_EQ(want, loom_emu::libs::half_to_float(h[i]));
        EXPECT_EQ(want, loom_emu::libs::bf16_to_float(bf[i]));
      }
    }
    // Broadcast (out of place) and reduce (max, in place) from every root.
    for (int root = 0; root < world; ++root) {
      std::vector<double> src(n);
      for (int i = 0; i < n; ++i) src[i] = value(rank, i);
      DeviceBuffer<double> dsrc(src), ddst(std::vector<double>(n, -1)), dred(src);
      ASSERT_EQ(ncclSuccess,
                ncclBroadcast(dsrc.get(), ddst.get(), n, ncclFloat64, root, comm, stream));
      ASSERT_EQ(ncclSuccess,
                ncclReduce(dred.get(), dred.get(), n, ncclFloat64, ncclMax, root, comm, stream));
      sync();
      const std::vector<double> dst = ddst.download(), red = dred.download();
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(value(root, i), dst[i]) << "broadcast from " << root;
        EXPECT_EQ(rank == root ? value(world - 1, i) : value(rank, i), red[i])
            << "reduce to " << root << " on rank " << rank;
      }
    }
    // All-gather into one buffer, and as grouped broadcasts (loom's all_gather).
    {
      std::vector<int64_t> in(n);
      for (int i = 0; i < n; ++i) in[i] = rank * 100 + i;
      DeviceBuffer<int64_t> din(in), flat(std::vector<int64_t>(n * world, 0));
      std::vector<std::unique_ptr<DeviceBuffer<int64_t>>> outs;
      for (int r = 0; r < world; ++r)
        outs.push_back(std::make_unique<DeviceBuffer<int64_t>>(std::vector<int64_t>(n, 0)));
      ASSERT_EQ(ncclSuccess, ncclAllGather(din.get(), flat.get(), n, ncclInt64, comm, stream));
      ASSERT_EQ(ncclSuccess, ncclGroupStart());
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(ncclSuccess,
                  ncclBroadcast(din.get(), outs[r]->get(), n, ncclInt64, r, comm, stream));
      ASSERT_EQ(ncclSuccess, ncclGroupEnd());
      sync();
      const std::vector<int64_t> got = flat.download();
      for (int r = 0; r < world; ++r) {
        const std::vector<int64_t> out = outs[r]->download();
        for (int i = 0; i < n; ++i) {
          EXPECT_EQ(r * 100 + i, got[r * n + i]);
          EXPECT_EQ(r * 100 + i, out[i]);
        }
      }
    }
    // Reduce-scatter: rank r's block j holds value(r + j); block `rank` of the sum lands here.
    {
      std::vector<float> in(n * world);
      for (int j = 0; j < world; ++j)
        for (int i = 0; i < n; ++i) in[j * n + i] = static_cast<float>(value(rank + j, i));
      DeviceBuffer<float> din(in), dout(n);
      ASSERT_EQ(ncclSuccess,
                ncclReduceScatter(din.get(), dout.get(), n, ncclFloat32, ncclSum, comm, stream));
      sync();
      const std::vector<float> out = dout.download();
      for (int i = 0; i < n; ++i) {
        double want = 0;
        for (int r = 0; r < world; ++r) want += value(r + rank, i);
        EXPECT_EQ(static_cast<float>(want), out[i]);
      }
    }
    // All-to-all of uneven sizes through grouped send/recv (loom's all_to_all),
    // this rank's message to itself included.
    {
      std::vector<std::unique_ptr<DeviceBuffer<float>>> ins, outs;
      ASSERT_EQ(ncclSuccess, ncclGroupStart());
      for (int j = 0; j < world; ++j) {
        ins.push_back(std::make_unique<DeviceBuffer<float>>(
            std::vector<float>(rank + j + 1, 10.0f * rank + j)));
        outs.push_back(
            std::make_unique<DeviceBuffer<float>>(std::vector<float>(j + rank + 1, -1.0f)));
        ASSERT_EQ(ncclSuccess,
                  ncclSend(ins[j]->get(), ins[j]->size(), ncclFloat32, j, comm, stream));
        ASSERT_EQ(ncclSuccess,
                  ncclRecv(outs[j]->get(), outs[j]->size(), ncclFloat32, j, comm, stream));
      }
      ASSERT_EQ(ncclSuccess, ncclGroupEnd());
      sync();
      for (int j = 0; j < world; ++j)
        EXPECT_EQ(std::vector<float>(j + rank + 1, 10.0f * j + rank), outs[j]->download())
            << "from rank " << j << " to rank " << rank;
    }
    // AlltoAll, Gather (to the last rank), Scatter (from rank 0).
    {
      std::vector<int32_t> in(n * world);
      for (int j = 0; j < world; ++j)
        for (int i = 0; i < n; ++i) in[j * n + i] = rank * 1000 + j * 10 + i;
      DeviceBuffer<int32_t> din(in), dout(std::vector<int32_t>(n * world, -1)),
          dgathered(std::vector<int32_t>(n * world, -1)), dpiece(std::vector<int32_t>(n, -1));
      ASSERT_EQ(ncclSuccess, ncclAlltoAll(din.get(), dout.get(), n, ncclInt32, comm, stream));
      ASSERT_EQ(ncclSuccess,
                ncclGather(din.get(), dgathered.get(), n, ncclInt32, world - 1, comm, stream));
      ASSERT_EQ(ncclSuccess, ncclScatter(din.get(), dpiece.get(), n, ncclInt32, 0, comm, stream));
      sync();
      const std::vector<int32_t> out = dout.download(), gathered = dgathered.download(),
                                 piece = dpiece.download();
      for (int j = 0; j < world; ++j)
        for (int i = 0; i < n; ++i) {
          EXPECT_EQ(j * 1000 + rank * 10 + i, out[j * n + i]);
          EXPECT_EQ(rank == world - 1 ? j * 1000 + i : -1, gathered[j * n + i]);
        }
      for (int i = 0; i < n; ++i) EXPECT_EQ(rank * 10 + i, piece[i]);
    }
    ncclResult_t state = ncclInternalError;
    EXPECT_EQ(ncclSuccess, ncclCommGetAsyncError(comm, &state));
    EXPECT_EQ(ncclSuccess, state);
    EXPECT_EQ(ncclSuccess, ncclCommFinalize(comm));
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclCollectivesTest, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "_ranks";
                         });

TEST(NcclTest, ACollectiveWaitsUntilEveryRanksStreamReachesIt) {
  const ncclUniqueId id = new_id();
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclSuccess, ncclGroupStart());
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(r));
    ASSERT_EQ(ncclSuccess, ncclCommInitRank(&comms[r], 2, id, r));
  }
  ASSERT_EQ(ncclSuccess, ncclGroupEnd());
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> bufs;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(r));
    streams.push_back(std::make_unique<Stream>());
    bufs.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(4, r + 1.0f)));
  }
  {
    StreamGate gate(*streams[0]);  // rank 0's stream is held before its all-reduce
    for (int r = 0; r < 2; ++r)
      ASSERT_EQ(ncclSuccess, ncclAllReduce(bufs[r]->get(), bufs[r]->get(), 4, ncclFloat32, ncclSum,
                                           comms[r], *streams[r]));
    EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(*streams[1])) << "rank 1 went on alone";
    EXPECT_EQ(std::vector<float>(4, 2.0f), bufs[1]->download());
    cudaGetLastError();
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(*streams[r]));
    EXPECT_EQ(std::vector<float>(4, 3.0f), bufs[r]->download()) << "rank " << r;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  cudaSetDevice(0);
}

TEST(NcclTest, ACapturedAllReduceRunsOnEachGraphLaunch) {
  const ncclUniqueId id = new_id();
  ranks(2, [&](int rank) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclSuccess, ncclCommInitRank(&comm, 2, id, rank));
    Stream stream;
    DeviceBuffer<float> d(std::vector<float>(3, rank + 1.0f));
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ASSERT_EQ(ncclSuccess, ncclAllReduce(d.get(), d.get(), 3, ncclFloat32, ncclSum, comm, stream));
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(stream, &graph));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
    EXPECT_EQ(std::vector<float>(3, rank + 1.0f), d.download()) << "the capture ran it";
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
    ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream));
    ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
    EXPECT_EQ(std::vector<float>(3, 6.0f), d.download()) << "(1 + 2), then (3 + 3)";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    EXPECT_EQ(ncclSuccess, ncclCommDestroy(comm));
  });
}

TEST(NcclTest, InitAllMakesOneCommunicatorPerDeviceThatOneThreadCanDrive) {
  ncclComm_t comms[3] = {nullptr, nullptr, nullptr};
  ASSERT_EQ(ncclSuccess, ncclCommInitAll(comms, 3, nullptr));
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<DeviceBuffer<double>>> bufs;
  for (int r = 0; r < 3; ++r) {
    int device = -1;
    EXPECT_EQ(ncclSuccess, ncclCommCuDevice(comms[r], &device));
    EXPECT_EQ(r, device);
    ASSERT_EQ(cudaSuccess, cudaSetDevice(r));
    streams.push_back(std::make_unique<Stream>());
    bufs.push_back(std::make_unique<DeviceBuffer<double>>(std::vector<double>(5, r + 1.0)));
  }
  ASSERT_EQ(ncclSuccess, ncclGroupStart());
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(ncclSuccess, ncclAllReduce(bufs[r]->get(), bufs[r]->get(), 5, ncclFloat64, ncclSum,
                                         comms[r], *streams[r]));
  ASSERT_EQ(ncclSuccess, ncclGroupEnd());
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(*streams[r]));
    EXPECT_EQ(std::vector<double>(5, 6.0), bufs[r]->download()) << "rank " << r;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclSuccess, ncclCommDestroy(c));
  cudaSetDevice(0);
}

TEST(NcclTest, APeerThatNeverComesLeavesTheInitInProgressUntilAborted) {
  const ncclUniqueId id = new_id();
  ncclComm_t comm = nullptr;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclInProgress, init_like_loom(&comm, 2, id, 0, std::chrono::milliseconds(200)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.19);
  ASSERT_NE(nullptr, comm);
  EXPECT_EQ(ncclSuccess, ncclCommAbort(comm)) << "abort of a communicator still forming";
  // The id may be used again afterwards (a fresh clique).
  ncclComm_t again = nullptr;
  EXPECT_EQ(ncclSuccess, ncclCommInitRank(&again, 1, id, 0));
  EXPECT_EQ(ncclSuccess, ncclCommDestroy(again));
}

// A collective waiting for its peer wakes when the peer aborts: its rank sees
// ncclRemoteError, and its stream is not left blocked.
TEST(NcclTest, AnAbortWakesThePeerWaitingForIt) {
  const ncclUniqueId id = new_id();
  ncclComm_t comms[2] = {nullptr, nullptr};
  ranks(2, [&](int rank) {
    ASSERT_EQ(ncclSuccess, init_like_loom(&comms[rank], 2, id, rank, std::chrono::seconds(20)));
  });
  ASSERT_NE(nullptr, comms[0]);
  ASSERT_NE(nullptr, comms[1]);
  Stream stream;  // device 0
  DeviceBuffer<float> t(std::vector<float>(4, 1));
  ASSERT_EQ(ncclSuccess,
            ncclAllReduce(t.get(), t.get(), 4, ncclFloat32, ncclSum, comms[0], stream));
  ncclResult_t state = ncclInternalError;
  ASSERT_EQ(ncclSuccess, ncclCommGetAsyncError(comms[0], &state));
  EXPECT_EQ(ncclSuccess, state) << "healthy while it waits";
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(stream));
  cudaGetLastError();
  ASSERT_EQ(ncclSuccess, ncclCommAbort(comms[1]));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream)) << "an NCCL failure is not a CUDA error";
  ASSERT_EQ(ncclSuccess, ncclCommGetAsyncError(comms[0], &state));
  EXPECT_EQ(ncclRemoteError, state);
  EXPECT_NE(std::string::npos, std::string(ncclGetLastError(comms[0])).find("rank 1 aborted"))
      << ncclGetLastError(comms[0]);
  EXPECT_EQ(ncclRemoteError,
            ncclAllReduce(t.get(), t.get(), 4, ncclFloat32, ncclSum, comms[0], stream))
      << "a failed communicator refuses new work";
  EXPECT_EQ(ncclSuccess, ncclCommAbort(comms[0]));
}

TEST(NcclTest, MismatchedCollectivesFailEveryRankInsteadOfHanging) {
  const ncclUniqueId id = new_id();
  std::atomic<int> invalid{0};
  ranks(2, [&](int rank) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclSuccess, ncclCommInitRank(&comm, 2, id, rank));  // blocking
    Stream stream;
    DeviceBuffer<float> t(std::vector<float>(8, 1));
    ASSERT_EQ(ncclSuccess, ncclAllReduce(t.get(), t.get(), rank == 0 ? 4 : 8, ncclFloat32, ncclSum,
                                         comm, stream));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclSuccess, ncclCommGetAsyncError(comm, &state));
    EXPECT_EQ(ncclInvalidUsage, state) << "rank " << rank;
    const std::string why = ncclGetLastError(comm);
    EXPECT_NE(std::string::npos, why.find("mismatched collectives")) << why;
    if (state == ncclInvalidUsage) ++invalid;
    EXPECT_EQ(ncclSuccess, ncclCommAbort(comm));
  });
  EXPECT_EQ(2, invalid.load());
}

TEST(NcclTest, TwoRanksOnOneDeviceAreBothRefused) {
  const ncclUniqueId id = new_id();
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);  // both ranks on device 0
      ncclComm_t comm = nullptr;
      if (init_like_loom(&comm, 2, id, r, std::chrono::seconds(20)) == ncclInvalidUsage) ++refused;
      if (comm != nullptr) ncclCommAbort(comm);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(2, refused.load());
  EXPECT_NE(std::string::npos, std::string(ncclGetLastError(nullptr)).find("Duplicate GPU"))
      << ncclGetLastError(nullptr);
}

TEST(NcclTest, VersionAndErrorStrings) {
  int version = 0;
  ASSERT_EQ(ncclSuccess, ncclGetVersion(&version));
  EXPECT_EQ(NCCL_VERSION_CODE, version);
  EXPECT_EQ(22800, version);
  EXPECT_EQ(0u, std::string(ncclGetErrorString(ncclInvalidArgument)).find("invalid argument"));
  EXPECT_EQ(ncclInvalidArgument, ncclGetVersion(nullptr));
}

class NcclOneRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
    id_ = new_id();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ASSERT_EQ(ncclSuccess, ncclCommInitRankConfig(&comm_, 1, id_, 0, &config))
        << "a group of one is ready at once";
  }
  void TearDown() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  ncclUniqueId id_;
  ncclComm_t comm_ = nullptr;
  Stream stream_;
  DeviceBuffer<float> t_{std::vector<float>(3, 2)};
};

TEST_F(NcclOneRankTest, CollectivesOverOneRankAreIdentities) {
  DeviceBuffer<float> out(3);
  ASSERT_EQ(ncclSuccess,
            ncclAllReduce(t_.get(), t_.get(), 3, ncclFloat32, ncclAvg, comm_, stream_));
  ASSERT_EQ(ncclSuccess, ncclBroadcast(t_.get(), out.get(), 3, ncclFloat32, 0, comm_, stream_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
  EXPECT_EQ(std::vector<float>(3, 2), t_.download());
  EXPECT_EQ(std::vector<float>(3, 2), out.download());
  // An empty operation is skipped, whatever its buffers.
  EXPECT_EQ(ncclSuccess, ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm_, stream_));
}

TEST_F(NcclOneRankTest, ArgumentChecks) {
  float* p = t_.get();
  EXPECT_EQ(ncclInvalidArgument,
            ncclAllReduce(p, p, 3, static_cast<ncclDataType_t>(13), ncclSum, comm_, stream_))
      << "a data type that does not exist";
  EXPECT_EQ(ncclInvalidArgument,
            ncclAllReduce(p, p, 3, ncclFloat32, static_cast<ncclRedOp_t>(9), comm_, stream_))
      << "an op that does not exist";
  EXPECT_EQ(ncclInvalidArgument, ncclBroadcast(p, p, 3, ncclFloat32, 1, comm_, stream_))
      << "a root out of range";
  EXPECT_EQ(ncclInvalidArgument, ncclSend(p, 3, ncclFloat32, -1, comm_, stream_))
      << "a peer out of range";
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(nullptr, p, 3, ncclFloat32, ncclSum, comm_, stream_))
      << "a NULL buffer";
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(p, p, 3, ncclFloat8e4m3, ncclSum, comm_, stream_))
      << "a reduction of fp8 data";
  EXPECT_EQ(ncclInvalidArgument, ncclAllReduce(p, p, 3, ncclFloat32, ncclSum, nullptr, stream_))
      << "a NULL communicator";
  EXPECT_EQ(ncclInvalidUsage, ncclGroupEnd()) << "ncclGroupEnd without ncclGroupStart";

  ncclComm_t other = nullptr;
  EXPECT_EQ(ncclInvalidArgument, ncclCommInitRank(&other, 2, id_, 2)) << "a rank out of range";
  ncclUniqueId junk{};
  EXPECT_EQ(ncclInvalidArgument, ncclCommInitRank(&other, 1, junk, 0))
      << "an id ncclGetUniqueId did not make";
  ncclConfig_t raw{};
  EXPECT_EQ(ncclInvalidArgument, ncclCommInitRankConfig(&other, 1, new_id(), 0, &raw))
      << "a config not from NCCL_CONFIG_INITIALIZER";
  EXPECT_EQ(ncclSuccess, ncclCommAbort(nullptr));
  ASSERT_EQ(ncclSuccess, ncclCommDestroy(comm_));
  ncclComm_t gone = comm_;
  comm_ = nullptr;
  EXPECT_EQ(ncclInvalidArgument, ncclCommAbort(gone)) << "a destroyed communicator";
  EXPECT_EQ(ncclInvalidArgument, ncclCommDestroy(gone));
}

TEST_F(NcclOneRankTest, AFailedCallFailsItsWholeGroupAndTheNextGroupStartsClean) {
  DeviceBuffer<float> out(std::vector<float>(3, -1));
  ASSERT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclSuccess, ncclBroadcast(t_.get(), out.get(), 3, ncclFloat32, 0, comm_, stream_));
  EXPECT_EQ(ncclInvalidArgument,
            ncclBroadcast(t_.get(), out.get(), 3, ncclFloat32, 7, comm_, stream_));
  EXPECT_EQ(ncclInvalidArgument, ncclGroupEnd());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
  EXPECT_EQ(std::vector<float>(3, -1), out.download()) << "part of a failed group ran";

  ASSERT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclSuccess, ncclGroupEnd()) << "an empty group";
  ASSERT_EQ(ncclSuccess, ncclGroupStart());
  EXPECT_EQ(ncclSuccess, ncclBroadcast(t_.get(), out.get(), 3, ncclFloat32, 0, comm_, stream_));
  EXPECT_EQ(ncclSuccess, ncclGroupEnd());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
  EXPECT_EQ(std::vector<float>(3, 2), out.download());
}

}  // namespace
