// ResNet-18 on synthetic images with DistributedDataParallel, one process
// per rank (start it with loomrun).  Rank 0 prints images per second of all
// ranks together.
//
//   bazel build //distributed/launch:loomrun //examples/resnet:train_ddp
//   bazel-bin/distributed/launch/loomrun --nproc_per_node=2 bazel-bin/examples/resnet/train_ddp --steps 10 --sync-bn
//
// --batch-size is per rank: a step trains on batch-size * world-size images.
// The synthetic data set (--dataset-size images) is split among the ranks by
// a DistributedSampler; --steps caps the steps per epoch.  --sync-bn turns
// the BatchNorms into SyncBatchNorms (statistics of the global batch; one
// more collective per BatchNorm per forward and backward).
#include <chrono>
#include <cstdio>

#include "distributed/distributed.h"
#include "examples/common/ProgressBar.h"
#include "examples/resnet/Common.h"

using namespace loom;
namespace resnet = loom::examples::resnet;

namespace {

struct DdpFlags {
  bool sync_bn = false;
  std::string backend = "gloo";
  std::string init_method = "env://";
  double timeout_s = 1800;
  double bucket_cap_mb = 25;
};

int run(const resnet::Options& o, const DdpFlags& f) {
  resnet::check(o);
  LOOM_CHECK(f.timeout_s > 0, "--timeout-s must be positive, got ", f.timeout_s);
  if (o.threads > 0) set_num_threads(o.threads);
  const Device device = resnet::resolve_device(o.device, distributed::get_local_rank());

  distributed::InitOptions init;
  init.init_method = f.init_method;
  init.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  distributed::init_process_group(f.backend, init);
  const int rank = distributed::get_rank(), world = distributed::get_world_size();

  manual_seed(o.seed);
  auto dataset = resnet::make_dataset(o);
  auto sampler = std::make_shared<data::DistributedSampler>(
      dataset->size(), data::DistributedSamplerOptions().num_replicas(world).rank(rank).shuffle(true).seed(o.seed));
  data::DataLoader loader(dataset,
                          data::DataLoaderOptions(o.batch_size).num_workers(o.num_workers).pin_memory(device.is_cuda()),
                          sampler);

  auto model = resnet::make_model(o);
  if (f.sync_bn) model = nn::convert_sync_batchnorm(model);
  model->to(device);
  // The optimizer (and amp, which may turn the model's parameters to 16 bits)
  // before DDP, so its buckets see the parameters as they will train.
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(o.lr).momentum(o.momentum));
  std::optional<amp::Amp> mixed = resnet::make_amp(o, *model, optimizer, device);
  distributed::DDPOptions ddp_options;
  ddp_options.bucket_cap_mb = f.bucket_cap_mb;
  distributed::DistributedDataParallel ddp(model, nullptr, ddp_options);

  if (rank == 0) {
    std::printf("loom ResNet-18 DDP: %d ranks (%s), %lld synthetic 3x%lldx%lld images, %lld classes, batch %lld per "
                "rank (%lld per step), %s, device %s, %d threads per rank, %zu buckets%s\n",
                world, f.backend.c_str(), static_cast<long long>(o.dataset_size),
                static_cast<long long>(o.image_size), static_cast<long long>(o.image_size),
                static_cast<long long>(o.num_classes), static_cast<long long>(o.batch_size),
                static_cast<long long>(o.batch_size * world), f.sync_bn ? "SyncBatchNorm" : "BatchNorm per rank",
                device.str().c_str(), get_num_threads(), ddp->bucket_sizes().size(),
                mixed ? (", mixed precision " + dtype_name(mixed->dtype()) + " " + mixed->opt_level()).c_str()
                      : "");
    std::fflush(stdout);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    sampler->set_epoch(static_cast<uint64_t>(epoch));
    const auto r = resnet::train_epoch([&](const Tensor& x) { return ddp->forward(x); }, optimizer, loader, o, epoch,
                                       device, world, /*verbose=*/rank == 0, mixed ? &*mixed : nullptr);
    if (rank == 0) resnet::print_epoch(r, o, epoch, world);
  }
  distributed::barrier();  // every rank done before the clock stops
  if (rank == 0) {
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("Training complete in: %s\n", examples::format_duration(total).c_str());
    std::fflush(stdout);
  }
  distributed::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train ResNet-18 on synthetic images with DistributedDataParallel (start with loomrun)"};
  resnet::Options options;
  DdpFlags flags;
  resnet::add_flags(app, options);
  app.add_flag("--sync-bn", flags.sync_bn, "Synchronise BatchNorm statistics across ranks (SyncBatchNorm)");
  app.add_option("--backend", flags.backend, "Process group backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"gloo", "nccl"}));
  app.add_option("--init-method", flags.init_method, "env://, tcp://host:port or file:///path")->capture_default_str();
  app.add_option("--timeout-s", flags.timeout_s, "Rendezvous and collective timeout in seconds")->capture_default_str();
  app.add_option("--bucket-cap-mb", flags.bucket_cap_mb, "DDP gradient bucket size (MiB)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options, flags);
  } catch (const Error& e) {
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "error on rank %s: %s\n", rank ? rank : "0", e.what());
    return 1;
  }
}
