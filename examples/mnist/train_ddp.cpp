// The MNIST trainer with DistributedDataParallel, as PyTorch's DDP tutorial:
// one process per rank, each training a replica of the ConvNet on its own
// shard of the data, gradients averaged across ranks during backward.
//
//   bazel build //distributed/launch:loomrun //examples/mnist:train_ddp
//   bazel-bin/distributed/launch/loomrun --nproc_per_node=2 bazel-bin/examples/mnist/train_ddp --epochs 2
//
// What each rank does:
//   init_process_group(--backend, --init-method)   rendezvous with the others
//                                                  (nccl with --device cuda: rank -> cuda:LOCAL_RANK)
//   ConvNet -> convert_sync_batchnorm -> DDP        BatchNorm over the global batch
//   DistributedSampler(shuffle, seed), set_epoch    each rank its own 1/world of the epoch
//   evaluate on a DistributedSampler shard          predictions gathered from all ranks
//   rank 0 saves the inner module                  same keys as the single-process trainer
//
// --batch-size is per rank (as in the tutorial): a step sees
// batch-size * world-size images in all.  The default, 64, makes two ranks
// step through the same 128 images per step as //examples/mnist:train.
//
// --amp bf16|fp16 and --opt-level O0..O3 train in mixed precision as
// //examples/mnist:train does (optim/Amp.h); --comm-hook fp16|bf16
// all-reduces the gradient buckets in 16 bits (DDP's compression hooks).
//
// Only rank 0 prints (progress, accuracy, timing); every rank reports its
// own errors on stderr, prefixed with its rank, and exits 1.  Intra-op
// threads per rank: OMP_NUM_THREADS (loomrun sets an even share of the
// cores), or --threads.
//
// Flags for the fault tests (tests/examples/mnist_ddp.cpp):
//   --timeout-s S      rendezvous and collective timeout (default 1800)
//   --pid-file-dir D   each rank writes D/rank<R>.pid once its first step is done
//   --fault K:N        (hidden) --fault-rank misbehaves at global step N:
//                        skip-allreduce  skips the step's backward (its gradient
//                                        all-reduces) and the update, then goes on
//                        stall           stops before the step's backward and
//                                        sleeps, issuing no collective
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "distributed/distributed.h"
#include "examples/common/ProgressBar.h"
#include "loom.h"
#include "tensor/CudaRuntime.h"

using namespace loom;

namespace {

struct Flags {
  int64_t epochs = 2;
  int64_t batch_size = 64;
  double lr = 0.01;
  double momentum = 0.9;
  std::string device = "cpu";
  std::string data_dir;
  std::string save = "mnist_ddp.safetensors";
  uint64_t seed = 4;
  int64_t num_workers = 1;
  int threads = 0;
  int64_t limit_train = 0;
  std::string backend = "auto";  // nccl for --device cuda, else gloo
  std::string init_method = "env://";
  double timeout_s = 1800;
  std::string pid_file_dir;
  std::string fault;
  int fault_rank = 1;
  std::string amp;        // --amp: bf16 or fp16
  std::string opt_level;  // --opt-level: O0..O3 (default O1 with --amp)
  std::string comm_hook = "none";
};

// A fault to inject on one rank (tests only).
struct Fault {
  enum class Kind { kNone, kSkipAllReduce, kStall } kind = Kind::kNone;
  int64_t step = 0;
  int rank = 1;

  static Fault parse(const std::string& text, int rank) {
    Fault f;
    f.rank = rank;
    if (text.empty()) return f;
    const size_t colon = text.find(':');
    LOOM_CHECK(colon != std::string::npos, "--fault: expected KIND:STEP (skip-allreduce:3, stall:3), got '", text,
               "'");
    const std::string kind = text.substr(0, colon);
    if (kind == "skip-allreduce") {
      f.kind = Kind::kSkipAllReduce;
    } else if (kind == "stall") {
      f.kind = Kind::kStall;
    } else {
      LOOM_FAIL("--fault: unknown kind '", kind, "'; expected skip-allreduce or stall");
    }
    try {
      f.step = std::stoll(text.substr(colon + 1));
    } catch (const std::exception&) {
      LOOM_FAIL("--fault: the step after ':' must be an integer, got '", text.substr(colon + 1), "'");
    }
    LOOM_CHECK(f.step >= 1, "--fault: the step must be >= 1, got ", f.step);
    return f;
  }
  bool hits(int my_rank, int64_t global_step) const {
    return kind != Kind::kNone && my_rank == rank && global_step == step;
  }
};

// The first n examples of a dataset (--limit-train).
class FirstN : public data::Dataset {
 public:
  FirstN(std::shared_ptr<data::Dataset> inner, int64_t n) : inner_(std::move(inner)), n_(std::min(n, inner_->size())) {}
  int64_t size() const override { return n_; }
  data::Example get(int64_t index) const override {
    LOOM_CHECK(index >= 0 && index < n_, "FirstN: index ", index, " out of range [0, ", n_, ")");
    return inner_->get(index);
  }
  data::Example get_batch(const std::vector<int64_t>& indices) const override {
    for (int64_t i : indices) LOOM_CHECK(i >= 0 && i < n_, "FirstN: index ", i, " out of range [0, ", n_, ")");
    return inner_->get_batch(indices);
  }

 private:
  std::shared_ptr<data::Dataset> inner_;
  int64_t n_;
};

// How many of this rank's `sampler.size()` samples are real examples rather
// than the padding a non-shuffling DistributedSampler repeats from the start:
// rank r takes positions r, r + R, r + 2R, ... of the padded order, and
// positions >= dataset_size are padding (always at the end of its list).
int64_t real_samples(const data::DistributedSampler& sampler) {
  const int64_t n = sampler.dataset_size(), r = sampler.rank(), world = sampler.num_replicas();
  const int64_t real = n > r ? (n - r + world - 1) / world : 0;
  return std::min(real, sampler.size());
}

// Top-1 accuracy (in %) on the whole test split: every rank scores its shard,
// the (prediction, label) rows of all ranks are gathered, the padding rows
// left out, so exactly test_size examples count.  Collective.
double evaluate(nn::Module& model, data::DataLoader& loader, const data::DistributedSampler& sampler,
                Device device, const amp::Amp* mixed) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<Tensor> rows;  // each (B, 2): prediction, label
  for (const auto& batch : loader) {
    Tensor images = batch.data.to(device);
    auto region = mixed ? mixed->autocast() : nullptr;
    Tensor predicted =
        model.forward(mixed ? mixed->input(images) : images).argmax(1).to(Device("cpu"));
    rows.push_back(stack({predicted, batch.target.to(predicted.dtype())}, 1));
  }
  model.train();
  Tensor mine = rows.empty() ? zeros({0, 2}, TensorOptions().dtype(kInt64)) : cat(rows, 0);
  mine = mine.slice(0, 0, real_samples(sampler)).contiguous();
  Tensor all = distributed::all_gather_concat(mine, distributed::default_group());  // (test_size, 2)
  LOOM_CHECK(all.size(0) == sampler.dataset_size(), "evaluate: gathered ", all.size(0),
             " predictions for a test set of ", sampler.dataset_size());
  const int64_t correct = all.select(1, 0).eq(all.select(1, 1)).sum().item<int64_t>();
  return all.size(0) > 0 ? 100.0 * correct / all.size(0) : 0.0;
}

void write_pid_file(const std::string& dir, int rank) {
  const std::string path = examples::user_path(dir) + "/rank" + std::to_string(rank) + ".pid";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    LOOM_CHECK(out.good(), "--pid-file-dir: cannot write ", tmp);
    out << ::getpid() << "\n";
  }
  LOOM_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "--pid-file-dir: cannot rename ", tmp, " to ", path);
}

int run(const Flags& flags) {
  if (flags.threads > 0) set_num_threads(flags.threads);
  LOOM_CHECK(flags.timeout_s > 0, "--timeout-s must be positive, got ", flags.timeout_s);
  const Fault fault = Fault::parse(flags.fault, flags.fault_rank);

  Device device(flags.device);
  if (device.is_cuda()) {
    LOOM_CHECK(cuda::is_available(), "--device ", flags.device, ": no CUDA device is visible (",
               cuda::built_with_cuda() ? "loom was built with CUDA, but the driver reports no GPU"
                                       : "this build of loom has no CUDA support",
               "); use --device cpu");
    // One GPU per local rank unless an index was given.
    if (flags.device == "cuda") {
      const int local_rank = distributed::get_local_rank();
      LOOM_CHECK(local_rank < cuda::device_count(), "--device cuda: local rank ", local_rank,
                 " has no GPU of its own (", cuda::device_count(), " visible); start at most ",
                 cuda::device_count(), " ranks per node, or name one with --device cuda:N");
      device = Device(DeviceType::kCUDA, local_rank);
    }
    cuda::set_device(device.index);  // this rank's GPU is current on the main thread
  }
  // nccl for CUDA tensors (one GPU per rank), gloo for CPU ones.
  const std::string backend = flags.backend != "auto" ? flags.backend : device.is_cuda() ? "nccl" : "gloo";

  distributed::InitOptions init;
  init.init_method = flags.init_method;
  init.timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  distributed::init_process_group(backend, init);
  const int rank = distributed::get_rank(), world = distributed::get_world_size();
  const bool main_rank = rank == 0;

  // Every rank starts from the same weights (DDP broadcasts rank 0's anyway)
  // and shuffles with the same seed; the sampler gives each its share.
  manual_seed(flags.seed);
  const std::string data_dir =
      flags.data_dir.empty() ? examples::workspace_root() + "/data/mnist" : examples::user_path(flags.data_dir);
  std::shared_ptr<data::Dataset> train_set = std::make_shared<data::datasets::MNIST>(data_dir, true);
  if (flags.limit_train > 0) train_set = std::make_shared<FirstN>(train_set, flags.limit_train);
  auto test_set = std::make_shared<data::datasets::MNIST>(data_dir, false);

  auto train_sampler = std::make_shared<data::DistributedSampler>(
      train_set->size(),
      data::DistributedSamplerOptions().num_replicas(world).rank(rank).shuffle(true).seed(flags.seed));
  auto test_sampler = std::make_shared<data::DistributedSampler>(
      test_set->size(), data::DistributedSamplerOptions().num_replicas(world).rank(rank).shuffle(false));
  data::DataLoader train_loader(train_set,
                                data::DataLoaderOptions(flags.batch_size)
                                    .num_workers(flags.num_workers)
                                    .pin_memory(device.is_cuda()),
                                train_sampler);
  data::DataLoader test_loader(test_set, data::DataLoaderOptions(1000), test_sampler);

  nn::models::ConvNet model;
  model = nn::convert_sync_batchnorm(model);  // BatchNorm statistics of the global batch
  model->to(device);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(flags.lr).momentum(flags.momentum));
  // Mixed precision converts the model before DDP buckets its gradients.
  std::optional<amp::Amp> mixed;
  if (!flags.amp.empty() || !flags.opt_level.empty()) {
    std::optional<DType> low;
    if (flags.amp == "bf16") low = kBFloat16;
    if (flags.amp == "fp16") low = kFloat16;
    mixed.emplace(amp::initialize(*model, optimizer, flags.opt_level.empty() ? "O1" : flags.opt_level,
                                  device.type, low));
  }
  distributed::DDPOptions ddp_options;
  if (device.is_cuda()) ddp_options.device_ids = {device};
  distributed::DistributedDataParallel ddp(model, nullptr, ddp_options);
  using Hook = distributed::DistributedDataParallelImpl::CommHook;
  if (flags.comm_hook == "fp16") ddp->register_comm_hook(Hook::kFp16Compress);
  if (flags.comm_hook == "bf16") ddp->register_comm_hook(Hook::kBf16Compress);
  nn::CrossEntropyLoss criterion;

  if (main_rank) {
    std::printf("loom MNIST DDP: %d ranks (%s, %s), %lld train / %lld test images from %s, device %s, "
                "batch %lld per rank (%lld per step), %d threads per rank\n",
                world, backend.c_str(), flags.init_method.c_str(), static_cast<long long>(train_set->size()),
                static_cast<long long>(test_set->size()), data_dir.c_str(), device.str().c_str(),
                static_cast<long long>(flags.batch_size), static_cast<long long>(flags.batch_size * world),
                get_num_threads());
    std::fflush(stdout);
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t global_step = 0;
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    train_sampler->set_epoch(static_cast<uint64_t>(epoch));  // a new shuffle, the same on every rank
    std::unique_ptr<examples::ProgressBar> bar;
    if (main_rank) bar = std::make_unique<examples::ProgressBar>(epoch, flags.epochs, train_loader.size());
    int64_t step = 0;
    for (const auto& batch : train_loader) {
      ++global_step;
      Tensor images = batch.data.to(device, /*non_blocking=*/true);
      Tensor labels = batch.target.to(device, /*non_blocking=*/true);
      Tensor loss;
      {
        auto region = mixed ? mixed->autocast() : nullptr;
        loss = criterion(ddp->forward(mixed ? mixed->input(images) : images), labels);
      }
      if (fault.hits(rank, global_step)) {
        if (fault.kind == Fault::Kind::kSkipAllReduce) {
          std::fprintf(stderr, "--fault: rank %d skips the backward (gradient all-reduce) of step %lld\n", rank,
                       static_cast<long long>(global_step));
          ++step;
          continue;
        }
        std::fprintf(stderr, "--fault: rank %d stalls before the backward of step %lld\n", rank,
                     static_cast<long long>(global_step));
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      if (mixed) {
        mixed->zero_grad();
        mixed->backward(loss);  // averaged over the ranks here, scaled
        mixed->step();
      } else {
        optimizer.zero_grad();
        loss.backward();  // gradients are averaged over the ranks here
        optimizer.step();
      }
      ++step;
      if (global_step == 1 && !flags.pid_file_dir.empty()) write_pid_file(flags.pid_file_dir, rank);
      if (bar) bar->update(step, loss.item<double>(), images.size(0) * world);
    }
    const double seconds = bar ? bar->finish() : 0.0;
    const double accuracy =
        evaluate(*ddp->module(), test_loader, *test_sampler, device, mixed ? &*mixed : nullptr);
    if (main_rank) {
      std::printf("epoch %lld/%lld done in %s: test accuracy %.2f%% (%lld images, %d ranks)\n",
                  static_cast<long long>(epoch), static_cast<long long>(flags.epochs),
                  examples::format_duration(seconds).c_str(), accuracy, static_cast<long long>(test_set->size()),
                  world);
      std::fflush(stdout);
    }
  }
  if (main_rank) {
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("Training complete in: %s\n", examples::format_duration(total).c_str());
    if (!flags.save.empty()) {
      // The inner module: keys as the single-process trainer's ("fc.weight",
      // not "module.fc.weight"); SyncBatchNorm keeps BatchNorm's names.
      const std::string path = examples::user_path(flags.save);
      nn::save(*ddp->module(), path, {{"model", "ConvNet"}, {"framework", "loom"}, {"world_size", std::to_string(world)}});
      std::printf("Saved model to %s\n", path.c_str());
    }
    std::fflush(stdout);
  }
  distributed::barrier();  // nobody leaves (closing connections) before rank 0 has saved
  distributed::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train the tutorial ConvNet on MNIST with DistributedDataParallel (start with loomrun)"};
  Flags flags;
  app.add_option("--epochs", flags.epochs, "Number of epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", flags.batch_size, "Images per step per rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", flags.lr, "SGD learning rate")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--momentum", flags.momentum, "SGD momentum")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--device", flags.device, "cpu, or cuda (each rank its LOCAL_RANK's GPU) / cuda:N")
      ->capture_default_str();
  app.add_option("--data-dir", flags.data_dir, "Folder with the MNIST IDX files (default: data/mnist)");
  app.add_option("--save", flags.save, "Where rank 0 saves the trained model (safetensors; empty: don't)")
      ->capture_default_str();
  app.add_option("--seed", flags.seed, "Seed for initialisation and shuffling (same on every rank)")
      ->capture_default_str();
  app.add_option("--num-workers", flags.num_workers, "DataLoader worker threads per rank")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", flags.threads, "Intra-op threads per rank (default: OMP_NUM_THREADS)");
  app.add_option("--limit-train", flags.limit_train, "Train on the first N images only (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--backend", flags.backend, "Process group backend: auto is nccl with --device cuda, else gloo")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}));
  app.add_option("--init-method", flags.init_method, "env://, tcp://host:port or file:///path")->capture_default_str();
  app.add_option("--timeout-s", flags.timeout_s, "Rendezvous and collective timeout in seconds")
      ->capture_default_str();
  app.add_option("--pid-file-dir", flags.pid_file_dir, "Each rank writes DIR/rank<R>.pid after its first step");
  app.add_option("--amp", flags.amp, "Mixed precision: bf16 or fp16 (the CPU takes bf16)")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--opt-level", flags.opt_level, "Apex-style opt level: O0, O1 (default with --amp), O2, O3")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  app.add_option("--comm-hook", flags.comm_hook, "All-reduce gradients as they are (none) or in fp16/bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "fp16", "bf16"}));
  app.add_option("--fault", flags.fault, "Test only: skip-allreduce:STEP or stall:STEP")->group("");
  app.add_option("--fault-rank", flags.fault_rank, "Test only: the rank --fault applies to")->group("");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(flags);
  } catch (const Error& e) {
    // Every rank reports its own failure (loomrun prefixes the line with it).
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "error on rank %s: %s\n", rank ? rank : "0", e.what());
    return 1;
  }
}
