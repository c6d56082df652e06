#include "examples/resnet/Common.h"

#include <chrono>
#include <cstdio>

#include "examples/common/ProgressBar.h"
#include "tensor/CudaRuntime.h"

namespace loom {
namespace examples {
namespace resnet {

void add_flags(CLI::App& app, Options& o) {
  app.add_option("--epochs", o.epochs, "Number of epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "Images per step (per rank under DDP)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "At most this many steps per epoch (0: the whole data set)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--image-size", o.image_size, "Images are 3 x S x S")->capture_default_str();
  app.add_option("--dataset-size", o.dataset_size, "Synthetic images per epoch (all ranks together)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--num-classes", o.num_classes, "Output classes")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "SGD learning rate")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--seed", o.seed, "Seed for the weights and the data")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (default: OMP_NUM_THREADS, else all cores)");
  app.add_option("--num-workers", o.num_workers, "DataLoader worker threads")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", o.device, "cpu, or cuda (the LOCAL_RANK's GPU) / cuda:N")->capture_default_str();
  app.add_option("--amp", o.amp, "Mixed precision dtype: bf16 (CPU or CUDA) or fp16 (CUDA)")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--opt-level", o.opt_level, "Apex opt level O0..O3 (default O1 with --amp)")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
}

void check(const Options& o) {
  LOOM_CHECK(o.image_size >= 32, "--image-size must be at least 32 (ResNet halves it five times), got ",
             o.image_size);
  LOOM_CHECK(o.threads >= 0, "--threads must be >= 0, got ", o.threads);
}

Device resolve_device(const std::string& spec, int local_rank) {
  Device device(spec);
  if (!device.is_cuda()) return device;
  LOOM_CHECK(cuda::is_available(), "--device ", spec, ": no CUDA device is visible (",
             cuda::built_with_cuda() ? "loom was built with CUDA, but the driver reports no GPU"
                                     : "this build of loom has no CUDA support",
             "); use --device cpu");
  if (spec == "cuda") {
    LOOM_CHECK(local_rank < cuda::device_count(), "--device cuda: local rank ", local_rank, " has no GPU of its own (",
               cuda::device_count(), " visible); start at most that many processes per node");
    return Device(DeviceType::kCUDA, local_rank);
  }
  return device;
}

std::shared_ptr<data::Dataset> make_dataset(const Options& o) {
  return std::make_shared<data::datasets::RandomClassification>(o.dataset_size, IntList{3, o.image_size, o.image_size},
                                                                o.num_classes, o.seed);
}

nn::models::ResNet make_model(const Options& o) { return nn::models::resnet18(o.num_classes); }

std::optional<amp::Amp> make_amp(const Options& o, nn::Module& model, optim::Optimizer& optimizer,
                                  Device device) {
  if (o.amp.empty() && o.opt_level.empty()) return std::nullopt;
  std::optional<DType> dtype;
  if (o.amp == "bf16") dtype = kBFloat16;
  else if (o.amp == "fp16") dtype = kFloat16;
  else LOOM_CHECK(o.amp.empty(), "--amp: expected bf16 or fp16, got ", o.amp);
  return amp::initialize(model, optimizer, o.opt_level.empty() ? "O1" : o.opt_level, device.type, dtype);
}

EpochResult train_epoch(const std::function<Tensor(const Tensor&)>& forward, optim::Optimizer& optimizer,
                        data::DataLoader& loader, const Options& o, int64_t epoch, Device device,
                        int world_size, bool verbose, amp::Amp* mixed) {
  using Clock = std::chrono::steady_clock;
  const int64_t steps = o.steps > 0 ? std::min(o.steps, loader.size()) : loader.size();
  std::unique_ptr<ProgressBar> bar;
  if (verbose) bar = std::make_unique<ProgressBar>(epoch, o.epochs, steps, /*log_every=*/5);
  EpochResult r;
  const auto start = Clock::now();
  Clock::time_point after_first = start;
  for (const auto& batch : loader) {
    if (r.steps == steps) break;
    Tensor images = batch.data.to(device, /*non_blocking=*/true);  // (B, 3, S, S)
    Tensor labels = batch.target.to(device, /*non_blocking=*/true);  // (B)
    Tensor loss;
    if (mixed != nullptr) {
      mixed->zero_grad();
      {
        auto region = mixed->autocast();
        loss = cross_entropy(forward(mixed->input(images)), labels);
      }
      mixed->backward(loss);
      mixed->step();
    } else {
      loss = cross_entropy(forward(images), labels);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }
    r.last_loss = loss.item<double>();  // also waits for the step on a GPU
    ++r.steps;
    r.images += images.size(0);
    if (r.steps == 1) {
      after_first = Clock::now();
    } else {
      r.steady_images += images.size(0);
    }
    if (bar) bar->update(r.steps, r.last_loss, images.size(0) * world_size);
  }
  if (bar) bar->finish();
  const auto end = Clock::now();
  r.seconds = std::chrono::duration<double>(end - start).count();
  r.steady_seconds = std::chrono::duration<double>(end - after_first).count();
  return r;
}

void print_epoch(const EpochResult& r, const Options& o, int64_t epoch, int world_size) {
  // Steady state (steps 2..N) when there are two steps or more.
  const bool steady = r.steps >= 2 && r.steady_seconds > 0;
  const double per_rank = steady ? r.steady_images / r.steady_seconds : (r.seconds > 0 ? r.images / r.seconds : 0);
  std::printf("epoch %lld/%lld: %lld steps in %s, loss %.4f, %.1f images/s", static_cast<long long>(epoch),
              static_cast<long long>(o.epochs), static_cast<long long>(r.steps), format_duration(r.seconds).c_str(),
              r.last_loss, per_rank * world_size);
  if (world_size > 1) std::printf(" (%d ranks x %.1f)", world_size, per_rank);
  if (steady) std::printf(" [steps 2-%lld]", static_cast<long long>(r.steps));
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace resnet
}  // namespace examples
}  // namespace loom
