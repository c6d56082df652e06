// The MNIST trainer: the ConvNet of PyTorch's DDP tutorial, trained with SGD
// and cross-entropy, evaluated on the test split after every epoch.
//
//   bazel run //examples/mnist:train -- --epochs 2 --batch-size 128
//   bazel run //examples/mnist:train -- --device cuda --cuda-graph
//   bazel run //examples/mnist:train -- --devices cpu:0,cpu:1
//   bazel run //examples/mnist:train -- --amp bf16 --opt-level O2
//
// --cuda-graph (CUDA only) captures the whole training step (forward, loss,
// backward, SGD) once as a CUDA graph after a few eager warm-up steps, and
// then replays it for every full batch copied into the same input tensors;
// a smaller last batch runs eagerly.
// --devices (two or more, e.g. cpu:0,cpu:1 or cuda:0,cuda:1) trains through
// nn::DataParallel: each batch is split over the devices, the replicas run
// at once, and the gradients are summed into the model on the first device
// (BatchNorm normalises each device's share of the batch by itself).  On CPU
// logical devices the intra-op threads (--threads, default all cores) are
// shared evenly between the devices.
// --amp bf16|fp16 trains in mixed precision (CPU: bf16 only) at
// --opt-level O1 (default: autocast + dynamic loss scaling), O2 (bfloat16
// model, float32 batch norm and master weights) or O3 (all 16-bit); see
// optim/Amp.h.  --opt-level alone picks the device's dtype.
// Data: IDX files in --data-dir (default: data/mnist, written by
// tools/setup.sh from 10,000 real digits: 8,000 train / 2,000 test); point it
// at the full MNIST (plain or .gz files) to train on 60,000.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>

#include "examples/common/ProgressBar.h"
#include "loom.h"

using namespace loom;

namespace {

struct Flags {
  int64_t epochs = 2;
  int64_t batch_size = 128;
  double lr = 0.01;
  double momentum = 0.9;
  std::string device = "cpu";
  bool device_given = false;  // --device was on the command line
  std::string devices;        // --devices: DataParallel over these
  std::string data_dir;
  std::string save = "mnist.safetensors";
  uint64_t seed = 4;
  int64_t num_workers = 1;
  int threads = 0;
  bool cuda_graph = false;
  std::string amp;        // --amp: bf16 or fp16 (empty: float32)
  std::string opt_level;  // --opt-level: O0..O3 (default O1 with --amp)
};

// Eager steps before the capture (they create the momentum buffers and the
// cuDNN/cuBLAS state a graph cannot create while capturing).
constexpr int kGraphWarmupSteps = 3;

// One training step.  Run eagerly, or recorded into a graph while capturing.
Tensor train_step(nn::Module& model, nn::CrossEntropyLoss& criterion,
                  optim::SGD& optimizer, const Tensor& images, const Tensor& labels) {
  optimizer.zero_grad();
  Tensor loss = criterion(model.forward(images), labels);
  loss.backward();
  optimizer.step();
  return loss;
}

// One mixed-precision step (--amp / --opt-level).
Tensor train_step(nn::Module& model, nn::CrossEntropyLoss& criterion, amp::Amp& amp,
                  const Tensor& images, const Tensor& labels) {
  amp.zero_grad();
  Tensor loss;
  {
    auto region = amp.autocast();
    loss = criterion(model.forward(amp.input(images)), labels);
  }
  amp.backward(loss);
  amp.step();
  return loss;
}

// The mixed-precision setup of --amp / --opt-level, or nothing.
std::optional<amp::Amp> make_amp(const Flags& flags, nn::Module& model, optim::SGD& optimizer,
                                 const Device& device) {
  if (flags.amp.empty() && flags.opt_level.empty()) return std::nullopt;
  std::optional<DType> dtype;
  if (flags.amp == "bf16") dtype = kBFloat16;
  else if (flags.amp == "fp16") dtype = kFloat16;
  else LOOM_CHECK(flags.amp.empty(), "--amp: expected bf16 or fp16, got ", flags.amp);
  return amp::initialize(model, optimizer, flags.opt_level.empty() ? "O1" : flags.opt_level,
                         device.type, dtype);
}

// The step as a CUDA graph (--cuda-graph): the input tensors every batch is
// copied into, and the loss every replay rewrites.
struct GraphedStep {
  Tensor images, labels, loss;
  cuda::Graph graph;
  int warmups_left = kGraphWarmupSteps;

  // Runs the step on this batch (warm-up, capture, or replay); returns the loss.
  double run(nn::Module& model, nn::CrossEntropyLoss& criterion, optim::SGD& optimizer,
             const data::Example& batch, Device device) {
    if (!images.defined()) {
      images = empty(batch.data.sizes(), TensorOptions(batch.data.dtype()).device(device));
      labels = empty(batch.target.sizes(), TensorOptions(batch.target.dtype()).device(device));
    }
    images.copy_(batch.data, /*non_blocking=*/true);
    labels.copy_(batch.target, /*non_blocking=*/true);
    if (warmups_left > 0) {
      --warmups_left;
      return train_step(model, criterion, optimizer, images, labels).item<double>();
    }
    if (!graph.is_captured()) {
      graph.capture_begin(device.index);
      loss = train_step(model, criterion, optimizer, images, labels);
      graph.capture_end();
    }
    graph.replay();
    return loss.item<double>();
  }
};

// Top-1 accuracy (in %) of `model` (the ConvNet, or DataParallel over it) on
// the test split.
double evaluate(nn::Module& model, data::DataLoader& loader, Device device,
                const amp::Amp* amp) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, total = 0;
  for (const auto& batch : loader) {
    Tensor images = batch.data.to(device);
    auto region = amp ? amp->autocast() : nullptr;
    Tensor logits = model.forward(amp ? amp->input(images) : images);
    Tensor predicted = logits.argmax(1);
    correct += predicted.eq(batch.target.to(device)).sum().item<int64_t>();
    total += batch.target.size(0);
  }
  model.train();
  return total > 0 ? 100.0 * correct / total : 0.0;
}

// "cpu:0" where Device::str() says "cpu", so device lists read alike.
std::string device_name(const Device& d) {
  return d.is_cpu() ? "cpu:" + std::to_string(d.index) : d.str();
}

// The devices of --devices ("cpu:0,cpu:1"), or the one of --device.
std::vector<Device> parse_devices(const Flags& flags) {
  if (flags.devices.empty()) return {Device(flags.device)};
  std::vector<Device> out;
  std::stringstream in(flags.devices);
  std::string item;
  while (std::getline(in, item, ',')) out.emplace_back(item);
  LOOM_CHECK(!out.empty(), "--devices: expected a comma-separated list such as cpu:0,cpu:1");
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      LOOM_CHECK(out[i] != out[j], "--devices: ", device_name(out[i]), " is listed twice");
  LOOM_CHECK(!flags.device_given || Device(flags.device) == out[0], "--device ", flags.device,
             " and --devices ", flags.devices, " disagree; give --devices alone (the model "
             "lives on its first device)");
  return out;
}

int run(const Flags& flags) {
  if (flags.threads > 0) set_num_threads(flags.threads);
  manual_seed(flags.seed);
  const std::vector<Device> devices = parse_devices(flags);
  const Device device = devices[0];
  const bool data_parallel = devices.size() > 1;
  LOOM_CHECK(!flags.cuda_graph || device.is_cuda(),
             "--cuda-graph needs a CUDA device (--device cuda), got ", device.str());
  LOOM_CHECK(!flags.cuda_graph || !data_parallel,
             "--cuda-graph captures a step on one device; it does not combine with --devices");
  if (data_parallel && device.is_cpu()) {
    // Each CPU logical device gets an even share of the threads, and so does
    // this thread, which runs the first device's backward.
    const int share = std::max(1, get_num_threads() / static_cast<int>(devices.size()));
    for (const Device& d : devices) set_device_num_threads(d, share);
    set_num_threads(share);
  }
  const std::string data_dir =
      flags.data_dir.empty() ? examples::workspace_root() + "/data/mnist" : examples::user_path(flags.data_dir);

  auto train_set = std::make_shared<data::datasets::MNIST>(data_dir, true);
  auto test_set = std::make_shared<data::datasets::MNIST>(data_dir, false);
  data::DataLoader train_loader(train_set, data::DataLoaderOptions(flags.batch_size)
                                               .shuffle(true)
                                               .seed(flags.seed)
                                               .num_workers(flags.num_workers)
                                               .pin_memory(device.is_cuda()));
  data::DataLoader test_loader(test_set, data::DataLoaderOptions(1000));

  nn::models::ConvNet model;
  model->to(device);
  // What the steps call: the model, or DataParallel over it.
  nn::DataParallel parallel(nullptr);
  if (data_parallel) parallel = nn::DataParallel(model, devices);
  nn::Module& net = data_parallel ? static_cast<nn::Module&>(*parallel) : *model;
  nn::CrossEntropyLoss criterion;
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(flags.lr).momentum(flags.momentum));
  LOOM_CHECK(!flags.cuda_graph || (flags.amp.empty() && flags.opt_level.empty()),
             "--cuda-graph does not combine with --amp/--opt-level (the loss scaler reads the "
             "device between steps)");
  std::optional<amp::Amp> mixed = make_amp(flags, *model, optimizer, device);

  std::string where = "device " + device.str();
  if (data_parallel) {
    where = "DataParallel over ";
    for (size_t i = 0; i < devices.size(); ++i) where += (i ? "," : "") + device_name(devices[i]);
    if (device.is_cpu())
      where += " (" + std::to_string(device_num_threads(device)) + " intra-op threads per device)";
  }
  std::string extra = flags.cuda_graph ? ", training step as a CUDA graph" : "";
  if (mixed)
    extra += ", mixed precision " + dtype_name(mixed->dtype()) + " " + mixed->opt_level();
  std::printf("loom MNIST: %lld train / %lld test images from %s, %s, %d threads%s\n",
              static_cast<long long>(train_set->size()), static_cast<long long>(test_set->size()),
              data_dir.c_str(), where.c_str(), get_num_threads(), extra.c_str());
  GraphedStep graphed;
  const auto start = std::chrono::steady_clock::now();
  double loop_seconds = 0;  // the epochs' training loops, without evaluation
  for (int64_t epoch = 1; epoch <= flags.epochs; ++epoch) {
    examples::ProgressBar bar(epoch, flags.epochs, train_loader.size());
    int64_t step = 0;
    for (const auto& batch : train_loader) {
      double loss;
      if (flags.cuda_graph && batch.data.size(0) == flags.batch_size) {
        loss = graphed.run(*model, criterion, optimizer, batch, device);
      } else {
        Tensor images = batch.data.to(device, /*non_blocking=*/true);
        Tensor labels = batch.target.to(device, /*non_blocking=*/true);
        loss = mixed ? train_step(net, criterion, *mixed, images, labels).item<double>()
                     : train_step(net, criterion, optimizer, images, labels).item<double>();
      }
      bar.update(++step, loss, batch.data.size(0));
    }
    const double seconds = bar.finish();
    loop_seconds += seconds;
    std::printf("epoch %lld/%lld done in %s: test accuracy %.2f%%\n", static_cast<long long>(epoch),
                static_cast<long long>(flags.epochs), examples::format_duration(seconds).c_str(),
                evaluate(net, test_loader, device, mixed ? &*mixed : nullptr));
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Training complete in: %s (training loops %.2f s)\n",
              examples::format_duration(total).c_str(), loop_seconds);
  if (!flags.save.empty()) {
    const std::string path = examples::user_path(flags.save);
    nn::save(*model, path, {{"model", "ConvNet"}, {"framework", "loom"}});
    std::printf("Saved model to %s\n", path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train the tutorial ConvNet on MNIST with loom"};
  Flags flags;
  app.add_option("--epochs", flags.epochs, "Number of epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", flags.batch_size, "Images per step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", flags.lr, "SGD learning rate")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--momentum", flags.momentum, "SGD momentum")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--device", flags.device, "cpu, cpu:N or cuda[:N]")->capture_default_str();
  app.add_option("--devices", flags.devices,
                 "Train with DataParallel over these devices (cpu:0,cpu:1 or cuda:0,cuda:1)");
  app.add_option("--data-dir", flags.data_dir, "Folder with the MNIST IDX files (default: data/mnist)");
  app.add_option("--save", flags.save, "Where to save the trained model (safetensors; empty: don't)")->capture_default_str();
  app.add_option("--seed", flags.seed, "Seed for initialisation and shuffling")->capture_default_str();
  app.add_option("--num-workers", flags.num_workers, "DataLoader worker threads")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--threads", flags.threads, "Intra-op threads (default: all cores)");
  app.add_flag("--cuda-graph", flags.cuda_graph,
               "Capture the training step once as a CUDA graph and replay it (CUDA only)");
  app.add_option("--amp", flags.amp, "Mixed precision: bf16 or fp16 (the CPU takes bf16)")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--opt-level", flags.opt_level,
                 "Apex-style opt level with --amp: O0, O1 (default), O2 or O3")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  CLI11_PARSE(app, argc, argv);
  flags.device_given = app.count("--device") > 0;
  try {
    return run(flags);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
