// ResNet-18 on synthetic images in one process: the baseline that
// train_ddp.cpp spreads over ranks.  Prints images per second.
//
//   bazel run //examples/resnet:train -- --steps 10 --batch-size 32
//   bazel run //examples/resnet:train -- --image-size 64 --steps 20   # quicker on a CPU
#include <chrono>
#include <cstdio>

#include "examples/common/ProgressBar.h"
#include "examples/resnet/Common.h"

using namespace loom;
namespace resnet = loom::examples::resnet;

namespace {

int run(const resnet::Options& o) {
  resnet::check(o);
  if (o.threads > 0) set_num_threads(o.threads);
  const Device device = resnet::resolve_device(o.device, 0);
  manual_seed(o.seed);
  auto dataset = resnet::make_dataset(o);
  data::DataLoader loader(dataset, data::DataLoaderOptions(o.batch_size)
                                       .shuffle(true)
                                       .seed(o.seed)
                                       .num_workers(o.num_workers)
                                       .pin_memory(device.is_cuda()));
  auto model = resnet::make_model(o);
  model->to(device);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(o.lr).momentum(o.momentum));
  std::optional<amp::Amp> mixed = resnet::make_amp(o, *model, optimizer, device);

  const std::string precision =
      mixed ? ", mixed precision " + dtype_name(mixed->dtype()) + " " + mixed->opt_level() : "";
  std::printf("loom ResNet-18: %lld synthetic 3x%lldx%lld images, %lld classes, batch %lld, device %s, %d threads%s\n",
              static_cast<long long>(o.dataset_size), static_cast<long long>(o.image_size),
              static_cast<long long>(o.image_size), static_cast<long long>(o.num_classes),
              static_cast<long long>(o.batch_size), device.str().c_str(), get_num_threads(), precision.c_str());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto r = resnet::train_epoch([&](const Tensor& x) { return model->forward(x); }, optimizer, loader, o,
                                       epoch, device, /*world_size=*/1, /*verbose=*/true,
                                       mixed ? &*mixed : nullptr);
    resnet::print_epoch(r, o, epoch, 1);
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Training complete in: %s\n", examples::format_duration(total).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train ResNet-18 on synthetic images with loom (one process)"};
  resnet::Options options;
  resnet::add_flags(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
