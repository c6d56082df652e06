// The tutorial's first example: a toy model spread over two devices.
//
//   bazel run //examples/model_parallel:toy -- --devices cpu:0,cpu:1
//
// ToyModel puts Linear(10, 10) on device 0 and Linear(10, 5) on device 1; the
// only change to a single-device model is the .to() between them (and the
// labels on the device of the outputs).  One step of MSELoss + SGD(lr 0.001)
// then shows every parameter updated, each on its own device.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "examples/model_parallel/Devices.h"
#include "loom.h"

using namespace loom;

namespace {

class ToyModelImpl : public nn::Module {
 public:
  ToyModelImpl(Device dev0, Device dev1) : nn::Module("ToyModel"), dev0_(dev0), dev1_(dev1) {
    net1 = register_module("net1", nn::Linear(10, 10));
    relu = register_module("relu", nn::ReLU());
    net2 = register_module("net2", nn::Linear(10, 5));
    net1->to(dev0_);
    net2->to(dev1_);
  }
  // x (N, 10) anywhere -> (N, 5) on dev1.
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(net1(x.to(dev0_)));
    return net2(h.to(dev1_));
  }
  nn::Linear net1{nullptr}, net2{nullptr};
  nn::ReLU relu{nullptr};

 private:
  Device dev0_, dev1_;
};
LOOM_MODULE(ToyModel);

int run(const std::string& devices_flag, uint64_t seed) {
  const std::vector<Device> devices = examples::parse_devices(devices_flag, 2, "--devices");
  manual_seed(seed);
  ToyModel model(devices[0], devices[1]);
  nn::MSELoss loss_fn;
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.001));

  std::map<std::string, Tensor> before;
  for (const auto& [name, p] : model->named_parameters()) before[name] = p.detach().clone();

  optimizer.zero_grad();
  Tensor outputs = model(randn({20, 10}));
  Tensor labels = randn({20, 5}).to(outputs.device());
  Tensor loss = loss_fn(outputs, labels);
  loss.backward();
  optimizer.step();

  std::printf("ToyModel on %s and %s: outputs %s, loss %.6f (on %s)\n", examples::device_name(devices[0]).c_str(),
              examples::device_name(devices[1]).c_str(), outputs.describe().c_str(), loss.item<double>(),
              examples::device_name(loss.device()).c_str());
  std::printf("%-14s %-8s %-10s %s\n", "parameter", "device", "shape", "max |change| after one SGD step");
  bool all_changed = true;
  for (const auto& [name, p] : model->named_parameters()) {
    const double change = (p.detach() - before[name]).abs().max().item<double>();
    all_changed = all_changed && change > 0;
    std::string shape;
    for (size_t d = 0; d < p.sizes().size(); ++d) shape += (d ? "x" : "") + std::to_string(p.sizes()[d]);
    std::printf("%-14s %-8s %-10s %.3e\n", name.c_str(), examples::device_name(p.device()).c_str(), shape.c_str(),
                change);
  }
  std::printf(all_changed ? "every parameter was updated on its own device\n"
                          : "some parameters did not change\n");
  return all_changed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The tutorial's ToyModel: two linear layers on two devices, one SGD step"};
  std::string devices = "cpu:0,cpu:1";
  uint64_t seed = 0;
  app.add_option("--devices", devices, "The two devices, e.g. cpu:0,cpu:1 or cuda:0,cuda:1")
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed for the weights and data")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(devices, seed);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
