// The MNIST trainer with loom's Horovod-style API, mirroring Horovod's
// PyTorch MNIST example (examples/pytorch/pytorch_mnist.py): one process per
// rank, started with loomrun (-np N is horovodrun's spelling):
//
//   bazel build //distributed/launch:loomrun //examples/mnist:train_horovod
//   bazel-bin/distributed/launch/loomrun -np 2 bazel-bin/examples/mnist/train_horovod --epochs 2
//
// What each rank does, as in Horovod's example:
//   hvd::init()                                   rendezvous (env://, gloo; nccl for CUDA tensors)
//   cuda::set_device(hvd::local_rank())            with --device cuda: one GPU per process
//   DistributedSampler(size(), rank())             each rank its own 1/size() of every epoch
//   SGD with lr * hvd::size()                       the effective batch is size() times larger
//   hvd::broadcast_parameters / _optimizer_state   every rank starts from rank 0's
//   hvd::DistributedOptimizer                      gradients averaged during backward, fused
//   metric_average (hvd::allreduce)                test loss and accuracy averaged over ranks
//   checkpoint on rank 0 only
//
// Only rank 0 prints and saves; every rank reports its own errors on stderr
// and exits 1.  --batch-size is per rank.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "distributed/horovod/horovod.h"
#include "examples/common/ProgressBar.h"
#include "loom.h"

using namespace loom;

namespace {

struct Flags {
  int64_t epochs = 2;
  int64_t batch_size = 64;
  int64_t test_batch_size = 1000;
  double lr = 0.01;
  double momentum = 0.5;
  uint64_t seed = 42;
  int64_t log_interval = 10;
  std::string device = "cpu";
  std::string data_dir;
  std::string save = "mnist_horovod.safetensors";
  int backward_passes_per_step = 1;
  double gradient_predivide_factor = 1.0;
  int64_t limit_train = 0;
  int threads = 0;
  double timeout_s = 1800;
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

// Horovod's metric_average: the value averaged over the ranks.
double metric_average(double value, const std::string& name) {
  return hvd::allreduce(scalar_tensor(value, kFloat64), name).item<double>();
}

void train_epoch(int64_t epoch, const Flags& flags, nn::Module& model, hvd::DistributedOptimizer& optimizer,
                 data::DataLoader& loader, data::DistributedSampler& sampler, Device device) {
  model.train();
  sampler.set_epoch(static_cast<uint64_t>(epoch));  // a new shuffle, the same on every rank
  std::unique_ptr<examples::ProgressBar> bar;
  if (hvd::rank() == 0) bar = std::make_unique<examples::ProgressBar>(epoch, flags.epochs, loader.size(), flags.log_interval);
  int64_t batch_idx = 0;
  for (const auto& batch : loader) {
    Tensor data = batch.data.to(device, /*non_blocking=*/true);
    Tensor target = batch.target.to(device, /*non_blocking=*/true);
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model.forward(data), target);
    loss.backward();  // all-reduces start here, gradient by gradient
    optimizer.step();  // waits for them, then steps SGD
    ++batch_idx;
    if (bar) bar->update(batch_idx, loss.item<double>(), data.size(0) * hvd::size());
  }
  if (bar) {
    const double seconds = bar->finish();
    std::printf("Train Epoch: %lld done in %s (%lld examples per rank)\n", static_cast<long long>(epoch),
                examples::format_duration(seconds).c_str(), static_cast<long long>(sampler.size()));
    std::fflush(stdout);
  }
}

void test(nn::Module& model, data::DataLoader& loader, data::DistributedSampler& sampler, Device device) {
  NoGradGuard no_grad;
  model.eval();
  double test_loss = 0, test_accuracy = 0;
  for (const auto& batch : loader) {
    Tensor data = batch.data.to(device), target = batch.target.to(device);
    Tensor output = model.forward(data);
    test_loss += cross_entropy(output, target, Reduction::kSum).item();
    test_accuracy += output.argmax(1).eq(target).sum().item();
  }
  // Per rank, then averaged over the ranks (Horovod's metric_average).
  const double n = static_cast<double>(sampler.size());
  test_loss = metric_average(test_loss / n, "avg_loss");
  test_accuracy = metric_average(test_accuracy / n, "avg_accuracy");
  if (hvd::rank() == 0) {
    std::printf("Test set: Average loss: %.4f, Accuracy: %.2f%%\n", test_loss, 100.0 * test_accuracy);
    std::fflush(stdout);
  }
}

int run(const Flags& flags) {
  LOOM_CHECK(flags.timeout_s > 0, "--timeout-s must be positive, got ", flags.timeout_s);
  hvd::InitOptions init;
  init.timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  hvd::init(init);
  manual_seed(flags.seed);
  if (flags.threads > 0) set_num_threads(flags.threads);

  Device device(flags.device);
  if (device.is_cuda()) {
    LOOM_CHECK(cuda::is_available(), "--device ", flags.device, ": no CUDA device is visible; use --device cpu");
    // Pin one GPU per process (Horovod: torch.cuda.set_device(hvd.local_rank())).
    if (flags.device == "cuda") device = Device(kCUDA, hvd::local_rank() % cuda::device_count());
    cuda::set_device(device.index);
  }

  const std::string data_dir =
      flags.data_dir.empty() ? examples::workspace_root() + "/data/mnist" : examples::user_path(flags.data_dir);
  std::shared_ptr<data::Dataset> train_set = std::make_shared<data::datasets::MNIST>(data_dir, true);
  if (flags.limit_train > 0) train_set = std::make_shared<FirstN>(train_set, flags.limit_train);
  auto test_set = std::make_shared<data::datasets::MNIST>(data_dir, false);
  // Partition the data among the ranks.
  auto train_sampler = std::make_shared<data::DistributedSampler>(
      train_set->size(), data::DistributedSamplerOptions().num_replicas(hvd::size()).rank(hvd::rank()).seed(flags.seed));
  auto test_sampler = std::make_shared<data::DistributedSampler>(
      test_set->size(), data::DistributedSamplerOptions().num_replicas(hvd::size()).rank(hvd::rank()).shuffle(false));
  data::DataLoader train_loader(train_set, data::DataLoaderOptions(flags.batch_size).pin_memory(device.is_cuda()),
                                train_sampler);
  data::DataLoader test_loader(test_set, data::DataLoaderOptions(flags.test_batch_size), test_sampler);

  nn::models::ConvNet model;
  model->to(device);
  // The learning rate scales with the number of ranks (the batch does too).
  const double lr_scaler = hvd::size();
  optim::SGD sgd(model->parameters(), optim::SGDOptions(flags.lr * lr_scaler).momentum(flags.momentum));
  // Every rank starts from rank 0's weights and optimizer state.
  hvd::broadcast_parameters(model->state_dict(), /*root_rank=*/0);
  hvd::broadcast_optimizer_state(sgd, /*root_rank=*/0);
  hvd::DistributedOptimizer optimizer(sgd, model->named_parameters(), hvd::Compression::none,
                                      flags.backward_passes_per_step, hvd::Average, flags.gradient_predivide_factor);

  if (hvd::rank() == 0) {
    std::printf("loom MNIST Horovod-style: %d ranks (%d on this machine), %lld train / %lld test images from %s, "
                "device %s, batch %lld per rank, lr %g (%g x %d ranks), fusion threshold %lld bytes\n",
                hvd::size(), hvd::local_size(), static_cast<long long>(train_set->size()),
                static_cast<long long>(test_set->size()), data_dir.c_str(), device.str().c_str(),
                static_cast<long long>(flags.batch_size), flags.lr * lr_scaler, flags.lr, hvd::size(),
                static_cast<long long>(hvd::fusion_threshold()));
    std::fflush(stdout);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    train_epoch(epoch, flags, *model, optimizer, train_loader, *train_sampler, device);
    test(*model, test_loader, *test_sampler, device);
  }
  if (hvd::rank() == 0) {
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("Training complete in: %s\n", examples::format_duration(total).c_str());
    // Checkpoint on rank 0 only: every rank holds the same weights.
    if (!flags.save.empty()) {
      const std::string path = examples::user_path(flags.save);
      nn::save(*model, path, {{"model", "ConvNet"}, {"framework", "loom"}, {"world_size", std::to_string(hvd::size())}});
      std::printf("Saved model to %s\n", path.c_str());
    }
    std::fflush(stdout);
  }
  hvd::shutdown();  // ends with a barrier: nobody leaves before rank 0 has saved
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train the tutorial ConvNet on MNIST with loom's Horovod-style API (start with loomrun -np N)"};
  Flags flags;
  app.add_option("--epochs", flags.epochs, "Number of epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", flags.batch_size, "Images per step per rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--test-batch-size", flags.test_batch_size, "Images per test batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", flags.lr, "SGD learning rate per rank (scaled by the number of ranks)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--momentum", flags.momentum, "SGD momentum")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--seed", flags.seed, "Seed for initialisation and shuffling")->capture_default_str();
  app.add_option("--log-interval", flags.log_interval, "Batches between progress lines (when not a terminal)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--device", flags.device, "cpu, or cuda (each rank its local rank's GPU) / cuda:N")
      ->capture_default_str();
  app.add_option("--data-dir", flags.data_dir, "Folder with the MNIST IDX files (default: data/mnist)");
  app.add_option("--save", flags.save, "Where rank 0 saves the trained model (safetensors; empty: don't)")
      ->capture_default_str();
  app.add_option("--backward-passes-per-step", flags.backward_passes_per_step,
                 "Backward passes accumulated locally per all-reduce")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--gradient-predivide-factor", flags.gradient_predivide_factor,
                 "Divide gradients by this before the sum, multiply after")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--limit-train", flags.limit_train, "Train on the first N images only (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", flags.threads, "Intra-op threads per rank (default: OMP_NUM_THREADS)");
  app.add_option("--timeout-s", flags.timeout_s, "Rendezvous and collective timeout in seconds")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(flags);
  } catch (const Error& e) {
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "error on rank %s: %s\n", rank ? rank : "0", e.what());
    return 1;
  }
}
