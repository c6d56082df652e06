// One training step (forward, cross-entropy, backward, SGD momentum step) of
// a zoo model on random data, timed over many iterations after a warm-up.
// Prints one line: "loom <model> batch=<B> size=<S> threads=<T> ms_per_step=<median> mean=<mean>".
// bench/compare_train_step.sh runs it beside the PyTorch twin (train_step.py).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "loom.h"

using namespace loom;

int main(int argc, char** argv) {
  CLI::App app{"Time a loom training step"};
  std::string model_name = "convnet";
  int64_t batch = 128, size = 28, iters = 30, warmup = 5;
  int threads = 2;
  app.add_option("--model", model_name, "convnet | resnet18 | resnet50")->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--size", size, "Image height and width")->capture_default_str();
  app.add_option("--iters", iters)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);
  manual_seed(0);

  std::shared_ptr<nn::Module> model;
  int64_t channels = 3, classes = 10;
  if (model_name == "convnet") {
    model = nn::models::ConvNet().ptr();
    channels = 1;
  } else if (model_name == "resnet18") {
    model = nn::models::resnet18(classes).ptr();
  } else if (model_name == "resnet50") {
    model = nn::models::resnet50(classes).ptr();
  } else {
    std::fprintf(stderr, "unknown model %s\n", model_name.c_str());
    return 2;
  }
  Tensor x = randn({batch, channels, size, size});
  Tensor y = randint(0, classes, {batch});
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  std::vector<double> ms;
  for (int64_t i = 0; i < warmup + iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    (void)loss.item<float>();
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  std::printf("loom %s batch=%lld size=%lld threads=%d ms_per_step=%.2f mean=%.2f\n", model_name.c_str(),
              static_cast<long long>(batch), static_cast<long long>(size), threads,
              sorted[sorted.size() / 2], mean);
  return 0;
}
