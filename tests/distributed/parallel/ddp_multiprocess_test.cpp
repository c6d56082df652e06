// DDP across real processes, the way users run it: distributed::spawn forks
// the ranks, init_process_group("gloo") connects them through env://, DDP and
// convert_sync_batchnorm use the default group.  Each rank also trains the
// reference (one process, whole batch) itself and checks after every step
// that its parameters and buffers match; a mismatch fails that rank, and
// spawn turns it into a loom::Error here.  The parent does no tensor work
// before forking (libgomp does not survive fork).
#include <sstream>

#include "distributed/DefaultGroup.h"
#include "distributed/launch/Spawn.h"
#include "distributed/parallel/DistributedDataParallel.h"
#include "distributed/parallel/SyncBatchNorm.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using ModulePtr = std::shared_ptr<nn::Module>;

ModulePtr make_convnet() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 3, 3).padding(1)), nn::BatchNorm2d(3),
                        nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)),
                        nn::Flatten(), nn::Linear(3 * 2 * 2, 2))
      .ptr();
}

double max_abs_diff(const nn::Module& a, const nn::Module& b) {
  const auto sa = a.state_dict(), sb = b.state_dict();
  LOOM_CHECK(sa.size() == sb.size(), "state sizes differ");
  double worst = 0;
  for (size_t i = 0; i < sa.size(); ++i) {
    const auto x = sa[i].second.to_vector<double>(), y = sb[i].second.to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

void train_rank(int rank, int world) {
  InitOptions init;
  init.timeout = std::chrono::milliseconds(20000);
  auto pg = init_process_group("gloo", init);
  LOOM_CHECK(pg->size() == world && pg->rank() == rank, "unexpected group");

  manual_seed(100);
  ModulePtr reference = make_convnet();
  manual_seed(200 + rank);  // every rank starts different; DDP broadcasts rank 0's
  ModulePtr model = make_convnet();
  if (rank == 0) model->load_state_dict(reference->state_dict());
  model = nn::convert_sync_batchnorm(model);  // the default group
  DistributedDataParallel ddp(model);
  optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));

  const int64_t batch = 12, shard = batch / world;
  Generator gen(5);
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({batch, 1, 4, 4}, {}, &gen);
    Tensor y = randn({batch, 2}, {}, &gen);
    ref_opt.zero_grad();
    mse_loss(reference->forward(x), y).backward();
    ref_opt.step();

    opt.zero_grad();
    mse_loss(ddp->forward(x.narrow(0, rank * shard, shard)), y.narrow(0, rank * shard, shard))
        .backward();
    opt.step();
    const double diff = max_abs_diff(*model, *reference);
    LOOM_CHECK(diff <= 1e-5, "rank ", rank, " step ", step, ": parameters differ from the "
               "single-process reference by ", diff);
  }
  destroy_process_group();
}

TEST(DistributedDataParallelMultiprocess, SyncBatchNormConvNetMatchesSingleProcess) {
  for (int world : {2, 3}) {
    SpawnOptions options;
    options.timeout = std::chrono::milliseconds(60000);
    try {
      spawn([world](int rank) { train_rank(rank, world); }, world, options);
    } catch (const Error& e) {
      ADD_FAILURE() << "world " << world << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace distributed
}  // namespace loom
