// The tutorial's "DDP + model parallel" demo: two processes, each holding a
// ToyMpModel spread over two devices, wrapped in DistributedDataParallel
// without device_ids (the module stays where it is; DDP buckets gradients per
// device and all-reduces them over gloo).
//
//   bazel run //examples/model_parallel:ddp_mp                    # spawns 2 ranks itself
//   loomrun --nproc_per_node 2 bazel-bin/examples/model_parallel/ddp_mp   # or under the launcher
//
// Rank r puts net1 on cpu:2r and net2 on cpu:2r+1 (with --device-type cuda:
// cuda:2r and cuda:2r+1).  Each rank trains on its own random data for
// --steps SGD steps, prints its loss, and at the end checks that the
// parameters are identical on every rank (DDP averaged the gradients).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "distributed/distributed.h"
#include "examples/model_parallel/Devices.h"
#include "loom.h"

using namespace loom;

namespace {

class ToyMpModelImpl : public nn::Module {
 public:
  ToyMpModelImpl(Device dev0, Device dev1) : nn::Module("ToyMpModel"), dev0_(dev0), dev1_(dev1) {
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
LOOM_MODULE(ToyMpModel);

struct Flags {
  int64_t steps = 5;
  int nprocs = 2;
  std::string device_type = "cpu";
};

// One rank's work; throws loom::Error on failure.
void demo_model_parallel(const Flags& flags) {
  set_num_threads(1);  // two ranks x two devices share the machine
  distributed::init_process_group("gloo");
  const int rank = distributed::get_rank();
  const int world = distributed::get_world_size();
  const DeviceType type = Device(flags.device_type).type;
  const Device dev0(type, 2 * rank), dev1(type, 2 * rank + 1);

  manual_seed(1000 + rank);  // different initial weights: DDP broadcasts rank 0's
  ToyMpModel mp_model(dev0, dev1);
  distributed::DistributedDataParallel ddp_mp_model(mp_model, nullptr, distributed::DDPOptions{});  // no device_ids
  nn::MSELoss loss_fn;
  optim::SGD optimizer(ddp_mp_model->parameters(), optim::SGDOptions(0.001));

  for (int64_t step = 1; step <= flags.steps; ++step) {
    optimizer.zero_grad();
    Tensor outputs = ddp_mp_model(randn({20, 10}));
    Tensor labels = randn({20, 5}).to(dev1);
    Tensor loss = loss_fn(outputs, labels);
    loss.backward();
    optimizer.step();
    std::printf("rank %d/%d (net1 on %s, net2 on %s): step %lld loss %.6f\n", rank, world,
                examples::device_name(dev0).c_str(), examples::device_name(dev1).c_str(), static_cast<long long>(step),
                loss.item<double>());
    std::fflush(stdout);
  }

  // Identical on every rank iff the element-wise max and min over ranks agree.
  bool equal = true;
  for (const auto& [name, p] : mp_model->named_parameters()) {
    Tensor high = p.detach().clone(), low = p.detach().clone();
    distributed::all_reduce(high, distributed::ReduceOp::Max);
    distributed::all_reduce(low, distributed::ReduceOp::Min);
    const double spread = (high - low).abs().max().item<double>();
    if (spread != 0) {
      equal = false;
      std::printf("rank %d: parameter %s differs across ranks by up to %g\n", rank, name.c_str(), spread);
    }
  }
  std::printf("rank %d: parameters %s on all %d ranks after %lld steps\n", rank,
              equal ? "identical" : "NOT identical", world, static_cast<long long>(flags.steps));
  std::fflush(stdout);
  distributed::destroy_process_group();
  LOOM_CHECK(equal, "ddp_mp: rank ", rank, ": parameters differ across ranks");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DDP over a model split across two devices (the tutorial's demo_model_parallel)"};
  Flags flags;
  app.add_option("--steps", flags.steps, "SGD steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--nprocs", flags.nprocs, "Processes to spawn when not started by a launcher")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--device-type", flags.device_type, "cpu or cuda (rank r uses indices 2r, 2r+1)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr) {
      demo_model_parallel(flags);  // started by loomrun / torchrun / Slurm
    } else {
      std::printf("Running DDP with model parallel example on %d processes.\n", flags.nprocs);
      std::fflush(stdout);
      distributed::spawn([&flags](int) { demo_model_parallel(flags); }, flags.nprocs);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
