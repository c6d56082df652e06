// ProcessGroupNccl on real GPUs (gpu + multiprocess tags): every collective,
// dtype and reduce op; the timeout paths; DDP and SyncBatchNorm on CUDA
// against single-process training.  Each case runs in processes forked by
// distributed::spawn, rank r on cuda:r.
//
// NCCL cannot put two ranks of one communicator on the same GPU ("Using the
// same CUDA device multiple times as different ranks of the same NCCL
// communicator is not supported", NCCL user guide, Creating a Communicator),
// so the two-process cases need two visible GPUs and skip otherwise; with one
// GPU the same suites run on a group of one process (NCCL runs collectives
// over one rank, so streams, events, dtypes and ops are all exercised), and
// the timeout is tested with a peer that never comes.
//
// The parent never touches CUDA: a process that initialised the driver
// cannot fork children that use it.  visible_gpus() asks in a forked child.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/DefaultGroup.h"
#include "distributed/ProcessGroupGloo.h"
#include "distributed/ProcessGroupNccl.h"
#include "distributed/launch/Spawn.h"
#include "distributed/parallel/DistributedDataParallel.h"
#include "distributed/parallel/SyncBatchNorm.h"
#include "distributed/store/FileStore.h"
#include "distributed/store/HashStore.h"
#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Visible GPUs, asked in a forked child so this process never initialises CUDA.
int visible_gpus() {
  static const int count = [] {
    const pid_t pid = ::fork();
    if (pid == 0) _exit(std::min(cuda::device_count(), 100));
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
    return WEXITSTATUS(status);
  }();
  return count;
}

class NcclOneGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visible_gpus() < 1) GTEST_SKIP() << "no CUDA device visible";
  }
};

// Two ranks that are threads of one process, each with its own GPU.
class NcclTwoGpusOneProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visible_gpus() < 2)
      GTEST_SKIP() << "needs 2 GPUs (" << visible_gpus()
                   << " visible): NCCL cannot put two ranks of one communicator on one GPU";
  }
};

// Two ranks that are processes, each with its own GPU.
class NcclTwoGpus : public NcclTwoGpusOneProcess {
 protected:
  void SetUp() override {
#ifdef LOOM_CUDA_EMULATED
    GTEST_SKIP() << "the CUDA emulator's NCCL joins the ranks of one process only; these ranks "
                    "are processes (tools/cuda/emu/README.md)";
#endif
    NcclTwoGpusOneProcess::SetUp();
  }
};

// Checks inside a rank throw (gtest's EXPECT_* would stay in the child):
// spawn turns the failure into a loom::Error naming the rank, here a failure.
void require(bool cond, const std::string& what) {
  if (!cond) throw Error("check failed: " + what);
}

// Throws unless fn throws a loom::Error containing every part.
void require_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string text = e.what();
    for (const auto& p : parts)
      require(text.find(p) != std::string::npos, "error \"" + text + "\" mentions \"" + p + "\"");
    return;
  }
  throw Error("check failed: expected a loom::Error mentioning \"" + parts[0] + "\"");
}

// Runs fn(rank) in `world` processes; a failure in any fails the test.
void run_ranks(int world, const std::function<void(int)>& fn) {
  SpawnOptions options;
  options.timeout = milliseconds(180000);
  try {
    spawn([&](int rank) {
      cuda::set_device(rank);
      fn(rank);
    }, world, options);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

std::string temp_dir() {
  char path[] = "/tmp/loom_nccl_test_XXXXXX";
  const char* made = ::mkdtemp(path);
  return made ? std::string(made) : std::string("/tmp");
}

ProcessGroupPtr init_nccl(int rank, int world, std::shared_ptr<Store> store,
                          milliseconds timeout = milliseconds(60000), bool blocking = false) {
  InitOptions options;
  options.store = std::move(store);
  options.rank = rank;
  options.world_size = world;
  options.timeout = timeout;
  options.nccl.blocking_wait = blocking;
  auto pg = init_process_group("nccl", options);
  require(pg->backend() == "nccl" && get_backend() == "nccl", "backend nccl");
  return pg;
}

// ---- every collective, dtype and op ------------------------------------------------------

const std::vector<DType> kDTypes = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product,
                                    ReduceOp::Min, ReduceOp::Max};

// Rank r's value at i: small, so products stay exact in every dtype.
double value(int rank, int64_t i, DType dtype) {
  if (dtype == kBool) return (i + rank) % 2 == 0 ? 1.0 : 0.0;
  if (is_floating_point(dtype)) return 0.5 * (rank + 1) + static_cast<double>(i % 5) - 1.0;
  return static_cast<double>(rank + 1 + i % 3);
}

Tensor input(int rank, int64_t n, DType dtype, Device device) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i, dtype);
  return tensor(v, {n}, TensorOptions(kFloat64)).to(dtype).to(device);
}

double combine(double a, double b, ReduceOp op, DType dtype) {
  if (dtype == kBool) {
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? std::max(a, b) : std::min(a, b);
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

std::vector<double> expected_reduce(int world, int64_t n, DType dtype, ReduceOp op) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    double acc = value(0, i, dtype);
    for (int r = 1; r < world; ++r) acc = combine(acc, value(r, i, dtype), op, dtype);
    if (op == ReduceOp::Avg) acc /= world;
    out[i] = acc;
  }
  return out;
}

void require_values(const Tensor& t, const std::vector<double>& expected, const std::string& what) {
  const std::vector<double> got = t.to_vector<double>();
  require(got.size() == expected.size(), what + ": size");
  for (size_t i = 0; i < got.size(); ++i)
    require(std::abs(got[i] - expected[i]) <= 1e-5 * (1 + std::abs(expected[i])),
            what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                ", expected " + std::to_string(expected[i]));
}

std::vector<double> values_of(int rank, int64_t n, DType dtype) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i, dtype);
  return v;
}

// Every collective of `pg` (rank `rank` of `world`, on cuda:rank), every
// dtype and op, against the values each should give.
void check_every_collective(const ProcessGroupPtr& pg, int rank, int world) {
  const Device dev(kCUDA, rank);
  const int64_t n = 7;
  require(pg->device_for(Device(kCPU)) == dev, "device_for(cpu) is this rank's GPU");

  for (DType dtype : kDTypes) {
    const std::string d = dtype_name(dtype);
    for (ReduceOp op : kOps) {
      Tensor t = input(rank, n, dtype, dev);
      if (op == ReduceOp::Avg && !is_floating_point(dtype)) {
        require_error([&] { pg->all_reduce(t, op); }, {"reduce op avg needs a floating-point tensor"});
        continue;
      }
      WorkPtr w = pg->all_reduce(t, op);
      w->wait();  // orders this thread's stream; to_vector copies after it
      require_values(t, expected_reduce(world, n, dtype, op),
                     "all_reduce " + to_string(op) + " " + d);
      const auto until = Clock::now() + std::chrono::seconds(10);
      while (!w->is_completed() && Clock::now() < until)
        std::this_thread::sleep_for(milliseconds(1));
      require(w->is_completed(), "all_reduce work completes");
    }
    for (int root = 0; root < world; ++root) {
      Tensor b = input(rank, n, dtype, dev);
      pg->broadcast(b, root)->wait();
      require_values(b, values_of(root, n, dtype), "broadcast " + d);

      Tensor r = input(rank, n, dtype, dev);
      pg->reduce(r, root, ReduceOp::Max)->wait();
      require_values(r, rank == root ? expected_reduce(world, n, dtype, ReduceOp::Max)
                                     : values_of(rank, n, dtype),
                     "reduce " + d);
    }
    // all_gather into separate tensors (grouped broadcasts) and into views of
    // one buffer (one ncclAllGather).
    const Tensor in = input(rank, n, dtype, dev);
    std::vector<Tensor> outs, views;
    Tensor flat = zeros({world * n}, TensorOptions(dtype).device(dev));
    for (int r = 0; r < world; ++r) {
      outs.push_back(zeros({n}, TensorOptions(dtype).device(dev)));
      views.push_back(flat.narrow(0, r * n, n));
    }
    pg->all_gather(outs, in)->wait();
    pg->all_gather(views, in)->wait();
    for (int r = 0; r < world; ++r) {
      require_values(outs[r], values_of(r, n, dtype), "all_gather " + d);
      require_values(views[r], values_of(r, n, dtype), "all_gather (views) " + d);
    }
    Tensor into = zeros({world * n}, TensorOptions(dtype).device(dev));
    pg->all_gather_into_tensor(into, in)->wait();
    for (int r = 0; r < world; ++r)
      require_values(into.narrow(0, r * n, n), values_of(r, n, dtype), "all_gather_into_tensor " + d);

    const int root = world - 1;
    std::vector<Tensor> gathered;
    if (rank == root)
      for (int r = 0; r < world; ++r) gathered.push_back(zeros({n}, TensorOptions(dtype).device(dev)));
    pg->gather(gathered, in, root)->wait();
    if (rank == root)
      for (int r = 0; r < world; ++r) require_values(gathered[r], values_of(r, n, dtype), "gather " + d);

    std::vector<Tensor> pieces;
    if (rank == 0)
      for (int r = 0; r < world; ++r) pieces.push_back(input(r + 10, n, dtype, dev));
    Tensor piece = zeros({n}, TensorOptions(dtype).device(dev));
    pg->scatter(piece, pieces, 0)->wait();
    require_values(piece, values_of(rank + 10, n, dtype), "scatter " + d);

    // reduce_scatter: rank r's inputs[j] = input(r + j); output j = reduce over r.
    std::vector<Tensor> rs_inputs;
    Tensor rs_flat = zeros({world * n}, TensorOptions(dtype).device(dev));
    std::vector<Tensor> rs_views;
    for (int j = 0; j < world; ++j) {
      rs_inputs.push_back(input(rank + j, n, dtype, dev));
      rs_views.push_back(rs_flat.narrow(0, j * n, n));
      rs_views.back().copy_(rs_inputs.back());
    }
    std::vector<double> rs_expected(n);
    for (int64_t i = 0; i < n; ++i) {
      double acc = value(0 + rank, i, dtype);
      for (int r = 1; r < world; ++r) acc = combine(acc, value(r + rank, i, dtype), ReduceOp::Sum, dtype);
      rs_expected[i] = acc;
    }
    Tensor rs_out = zeros({n}, TensorOptions(dtype).device(dev));
    pg->reduce_scatter(rs_out, rs_inputs, ReduceOp::Sum)->wait();
    require_values(rs_out, rs_expected, "reduce_scatter " + d);
    Tensor rs_out2 = zeros({n}, TensorOptions(dtype).device(dev));
    pg->reduce_scatter(rs_out2, rs_views, ReduceOp::Sum)->wait();
    require_values(rs_out2, rs_expected, "reduce_scatter (views) " + d);

    // all_to_all with uneven sizes: rank i sends j + i + 1 values 10 i + j to j.
    std::vector<Tensor> a2a_in, a2a_out;
    for (int j = 0; j < world; ++j) {
      a2a_in.push_back(full({rank + j + 1}, dtype == kBool ? 1.0 : 10.0 * rank + j,
                            TensorOptions(dtype).device(dev)));
      a2a_out.push_back(zeros({j + rank + 1}, TensorOptions(dtype).device(dev)));
    }
    pg->all_to_all(a2a_out, a2a_in)->wait();
    for (int j = 0; j < world; ++j)
      require_values(a2a_out[j],
                     std::vector<double>(j + rank + 1, dtype == kBool ? 1.0 : 10.0 * j + rank),
                     "all_to_all " + d);
  }

  if (world == 2) {
    Tensor msg = input(rank, n, kFloat32, dev);
    if (rank == 0) {
      pg->send(msg, 1, 3)->wait();
      pg->recv(msg, 1, 4)->wait();
      require_values(msg, values_of(7, n, kFloat32), "recv on rank 0");
    } else {
      Tensor got = zeros({n}, TensorOptions(kFloat32).device(dev));
      pg->recv(got, 0, 3)->wait();
      require_values(got, values_of(0, n, kFloat32), "recv on rank 1");
      pg->send(input(7, n, kFloat32, dev), 0, 4)->wait();
    }
  }
  pg->barrier()->wait();

  // Argument errors are gloo's, with nccl's device rule.
  Tensor cpu = zeros({3});
  require_error([&] { pg->all_reduce(cpu); }, {"ProcessGroupNccl::all_reduce: tensor must be a CUDA tensor"});
  Tensor g = zeros({3}, TensorOptions(kFloat32).device(dev));
  require_error([&] { pg->broadcast(g, world); }, {"ProcessGroupNccl::broadcast: root must be in [0, "});
  std::vector<Tensor> few{g};
  if (world == 2)
    require_error([&] { pg->all_gather(few, g); }, {"ProcessGroupNccl::all_gather: expected 2 outputs"});
  require(!static_cast<ProcessGroupNccl&>(*pg).is_broken(), "group healthy");
}

void every_collective(int rank, int world) {
  const std::string dir = std::getenv("LOOM_TEST_STORE_DIR");
  check_every_collective(init_nccl(rank, world, std::make_shared<FileStore>(dir + "/store", world)),
                         rank, world);
  destroy_process_group();
}

TEST_F(NcclOneGpu, EveryCollectiveDTypeAndOpOnAGroupOfOne) {
  ::setenv("LOOM_TEST_STORE_DIR", temp_dir().c_str(), 1);
  run_ranks(1, [](int rank) { every_collective(rank, 1); });
}

TEST_F(NcclTwoGpus, EveryCollectiveDTypeAndOpAcrossTwoProcesses) {
  ::setenv("LOOM_TEST_STORE_DIR", temp_dir().c_str(), 1);
  run_ranks(2, [](int rank) { every_collective(rank, 2); });
}

// Two ranks as two threads of one process, each with its own GPU (NCCL
// allows it; the ranks initialise their communicator at once): the same
// checks as the two-process case.  Under the CUDA emulator, whose NCCL joins
// ranks of one process only, this is the two-rank case that runs.
TEST_F(NcclTwoGpusOneProcess, EveryCollective) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> failures(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank)
    ranks.emplace_back([&, rank] {
      try {
        cuda::set_device(rank);
        ProcessGroupPtr pg = std::make_shared<ProcessGroupNccl>(store, rank, 2);
        check_every_collective(pg, rank, 2);
      } catch (const std::exception& e) {
        failures[rank] = e.what();
      }
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

// ---- timeouts -----------------------------------------------------------------------------

// Rank 0 of a group of 2 whose rank 1 never comes: making the communicator
// times out; wait() throws naming the collective, the rank and the timeout.
TEST_F(NcclOneGpu, PeerThatNeverComesTimesOutAndBreaksTheGroup) {
  run_ranks(1, [](int) {
    auto store = std::make_shared<HashStore>();
    ProcessGroupNccl pg(store, 0, 2, ProcessGroupNcclOptions().set_timeout(milliseconds(1500)));
    Tensor t = ones({4}, TensorOptions(kFloat32).device(Device(kCUDA, 0)));
    const auto start = Clock::now();
    WorkPtr w = pg.all_reduce(t);
    require_error([&] { w->wait(); }, {"all_reduce (sum) of 4 float32 on rank 0 of 2",
                      "timed out after 1500 ms"});
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    require(s < 30, "timed out promptly (" + std::to_string(s) + " s)");
    require(pg.is_broken(), "broken after a timeout");
    require_error([&] { pg.all_reduce(t)->wait(); }, {"the group is broken by an earlier failure"});
  });
}

// Rank 1 skips a collective: rank 0's times out, wait() throws, and the
// communicator is aborted instead of hanging.
TEST_F(NcclTwoGpus, SkippedCollectiveTimesOut) {
  const std::string dir = temp_dir();
  run_ranks(2, [dir](int rank) {
    auto store = std::make_shared<FileStore>(dir + "/store", 2);
    auto pg = init_nccl(rank, 2, store, milliseconds(2000), /*blocking=*/true);
    Tensor t = ones({4}, TensorOptions(kFloat32).device(Device(kCUDA, rank)));
    pg->all_reduce(t)->wait();  // communicator made, both ranks healthy
    if (rank == 0) {
      const auto start = Clock::now();
      require_error([&] { pg->all_reduce(t)->wait(); }, {"all_reduce (sum) of 4 float32 on rank 0 of 2",
                        "timed out after 2000 ms"});
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      require(s >= 1.5 && s < 30, "timed out after about 2 s (" + std::to_string(s) + " s)");
      store->set("rank0_done", "1");
    } else {
      store->wait({"rank0_done"}, milliseconds(60000));
    }
    destroy_process_group();
  });
}

// Rank 1 dies after the communicator is made: rank 0's next collective fails
// (NCCL's asynchronous error when the transport notices, else the timeout)
// instead of hanging, and wait() says which collective on which rank.
TEST_F(NcclTwoGpus, DeadPeerFailsInsteadOfHanging) {
  const std::string dir = temp_dir();
  run_ranks(2, [dir](int rank) {
    auto store = std::make_shared<FileStore>(dir + "/store", 2);
    auto pg = init_nccl(rank, 2, store, milliseconds(5000), /*blocking=*/true);
    Tensor t = ones({1024}, TensorOptions(kFloat32).device(Device(kCUDA, rank)));
    pg->all_reduce(t)->wait();
    if (rank == 1) _exit(0);  // gone without a word
    const auto start = Clock::now();
    require_error([&] { pg->all_reduce(t)->wait(); }, {"all_reduce (sum) of 1024 float32 on rank 0 of 2"});
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    require(s < 30, "failed promptly (" + std::to_string(s) + " s)");
    require(static_cast<ProcessGroupNccl&>(*pg).is_broken(), "broken after a dead peer");
    destroy_process_group();
  });
}

// ---- DDP and SyncBatchNorm on CUDA ---------------------------------------------------------

// A model made only of elementwise ops (exist on CUDA): y = x * w * scale + b.
class AffineImpl : public nn::Module {
 public:
  AffineImpl() : nn::Module("Affine") {
    std::vector<double> wv(8), bv(8);
    for (int i = 0; i < 8; ++i) wv[i] = 0.1 * (i + 1), bv[i] = -0.05 * i;
    w = register_parameter("w", tensor(wv, {8}, TensorOptions(kFloat32)));
    b = register_parameter("b", tensor(bv, {8}, TensorOptions(kFloat32)));
    unused = register_parameter("unused", zeros({3}));
    scale = register_buffer("scale", full({8}, 1.5));
  }
  Tensor forward(const Tensor& x) override { return x * w * scale + b; }
  Tensor w, b, unused, scale;
};

double max_abs_diff(const nn::Module& a, const nn::Module& b) {
  const auto sa = a.state_dict(), sb = b.state_dict();
  double worst = 0;
  for (size_t i = 0; i < sa.size(); ++i) {
    const auto x = sa[i].second.to_vector<double>(), y = sb[i].second.to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

void ddp_matches_single_process(int rank, int world) {
  const std::string dir = std::getenv("LOOM_TEST_STORE_DIR");
  init_nccl(rank, world, std::make_shared<FileStore>(dir + "/store", world));
  const Device dev(kCUDA, rank);
  auto reference = std::make_shared<AffineImpl>();  // CPU, whole batch
  auto model = std::make_shared<AffineImpl>();
  if (rank != 0) {  // DDP must broadcast rank 0's parameters and buffers
    autograd::NoGradGuard no_grad;
    model->w.add_(1.0);
    model->scale.fill_(7.0);
  }
  model->to(dev);
  DDPOptions options;
  options.device_ids = {dev};
  options.first_bucket_cap_mb = 1e-5;  // tiny buckets: one all-reduce per parameter
  options.bucket_cap_mb = 1e-5;
  options.find_unused_parameters = true;  // "unused" gets no gradient
  DistributedDataParallel ddp(std::shared_ptr<nn::Module>(model), nullptr, options);
  require(ddp->bucket_sizes().size() == 3, "three buckets");
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));

  const int64_t batch = 4 * world, shard = 4;
  Generator gen(11);
  for (int step = 0; step < 4; ++step) {
    Tensor x = randn({batch, 8}, {}, &gen);
    Tensor y = randn({batch, 8}, {}, &gen);
    ref_opt.zero_grad();
    Tensor ref_diff = reference->forward(x) - y;
    (ref_diff * ref_diff).mean().backward();
    ref_opt.step();

    opt.zero_grad();
    Tensor diff = ddp->forward(x.narrow(0, rank * shard, shard).to(dev)) -
                  y.narrow(0, rank * shard, shard).to(dev);
    (diff * diff).mean().backward();
    for (const auto& [name, p] : model->named_parameters())
      if (name == "unused") require(!p.grad().defined(), "a parameter no rank used keeps no gradient");
    opt.step();
    const double d = max_abs_diff(*model, *reference);
    require(d <= 1e-5, "rank " + std::to_string(rank) + " step " + std::to_string(step) +
                           ": DDP on CUDA differs from single-process training by " +
                           std::to_string(d));
  }
  destroy_process_group();
}

TEST_F(NcclOneGpu, DdpOnCudaMatchesSingleProcessTraining) {
  ::setenv("LOOM_TEST_STORE_DIR", temp_dir().c_str(), 1);
  run_ranks(1, [](int rank) { ddp_matches_single_process(rank, 1); });
}

TEST_F(NcclTwoGpus, DdpOnCudaAcrossTwoProcessesMatchesSingleProcessTraining) {
  ::setenv("LOOM_TEST_STORE_DIR", temp_dir().c_str(), 1);
  run_ranks(2, [](int rank) { ddp_matches_single_process(rank, 2); });
}

// SyncBatchNorm on CUDA over nccl: each rank's share of the output and of the
// input gradient equals batch norm of the whole batch on the CPU.
void sync_batch_norm_matches(int rank, int world) {
  const std::string dir = std::getenv("LOOM_TEST_STORE_DIR");
  auto pg = init_nccl(rank, world, std::make_shared<FileStore>(dir + "/store", world));
  const Device dev(kCUDA, rank);
  Generator gen(3);
  const int64_t shard = 3, c = 4;
  Tensor x = randn({shard * world, c, 5}, {}, &gen);
  Tensor g = randn({shard * world, c, 5}, {}, &gen);
  // Reference: the whole batch in one process (a gloo group of one).
  auto local = std::make_shared<ProcessGroupGloo>(std::make_shared<HashStore>(), 0, 1);
  Tensor xr = x.clone().requires_grad_(true);
  Tensor out_ref = nn::sync_batch_norm(xr, Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, local);
  (out_ref * g).sum().backward();

  Tensor xs = x.narrow(0, rank * shard, shard).to(dev).requires_grad_(true);
  Tensor out = nn::sync_batch_norm(xs, Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, pg);
  (out * g.narrow(0, rank * shard, shard).to(dev)).sum().backward();
  require(testing::AllClose(out.cpu(), out_ref.narrow(0, rank * shard, shard), 1e-4, 1e-5),
          "SyncBatchNorm output on CUDA");
  require(testing::AllClose(xs.grad().cpu(), xr.grad().narrow(0, rank * shard, shard), 1e-4, 1e-5),
          "SyncBatchNorm input gradient on CUDA");
  destroy_process_group();
}

TEST_F(NcclOneGpu, SyncBatchNormOnCuda) {
  ::setenv("LOOM_TEST_STORE_DIR", temp_dir().c_str(), 1);
  run_ranks(1, [](int rank) { sync_batch_norm_matches(rank, 1); });
}

TEST_F(NcclTwoGpus, SyncBatchNormOnCudaAcrossTwoProcesses) {
  ::setenv("LOOM_TEST_STORE_DIR", temp_dir().c_str(), 1);
  run_ranks(2, [](int rank) { sync_batch_norm_matches(rank, 2); });
}

}  // namespace
}  // namespace distributed
}  // namespace loom
