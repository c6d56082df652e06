// DDP overhead on CPU: the same training step with and without
// DistributedDataParallel, on every rank, in one run (launch with loomrun).
//
//   bazel-bin/distributed/launch/loomrun --nproc_per_node 2 bazel-bin/bench/ddp_overhead
//   bench/ddp_overhead.sh          (builds, then the above)
//
// Each rank builds two identical models: `local` trains alone (no
// communication at all), `ddp` is wrapped in DistributedDataParallel (bucketed
// gradient all-reduce overlapping backward, plus the buffer broadcast before
// each forward).  Rounds alternate `block` steps of each so both see the same
// machine state; the figure is the median step time of each, the slowest
// rank's.  Then one DDP step is shown as a timeline: when each bucket's last
// gradient arrived, when its all-reduce was launched and finished, and when
// backward ended (ms from the end of forward).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "distributed/distributed.h"
#include "loom.h"

using namespace loom;
namespace dist = loom::distributed;

namespace {

std::shared_ptr<nn::Module> make_model(const std::string& name) {
  if (name == "convnet") return nn::models::ConvNet().ptr();
  if (name == "resnet18") return nn::models::resnet18(10).ptr();
  LOOM_FAIL("ddp_overhead: unknown --model '", name, "' (convnet | resnet18)");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The slowest rank's value.
double max_over_ranks(double value) {
  Tensor t = full({1}, value, kFloat64);
  dist::all_reduce(t, dist::ReduceOp::Max);
  return t.item();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DDP step vs the same step without communication"};
  std::string model_name = "convnet";
  int64_t batch = 64, size = 28, rounds = 30, block = 3, warmup = 5;
  int threads = 1;
  double bucket_cap_mb = 25, first_bucket_cap_mb = 1;
  bool broadcast_buffers = true, check_consistency = true;
  size_t small_message_bytes = dist::ProcessGroupGlooOptions{}.small_message_bytes;
  bool batch_transport_thread = dist::ProcessGroupGlooOptions{}.batch_transport_thread;
  app.add_option("--model", model_name, "convnet | resnet18")->capture_default_str();
  app.add_option("--batch", batch, "Images per rank per step")->capture_default_str();
  app.add_option("--size", size, "Image height and width")->capture_default_str();
  app.add_option("--rounds", rounds)->capture_default_str();
  app.add_option("--block", block, "Steps of each kind per round")->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads per rank")->capture_default_str();
  app.add_option("--bucket-cap-mb", bucket_cap_mb)->capture_default_str();
  app.add_option("--first-bucket-cap-mb", first_bucket_cap_mb)->capture_default_str();
  app.add_option("--broadcast-buffers", broadcast_buffers, "DDPOptions::broadcast_buffers")->capture_default_str();
  app.add_option("--check-consistency", check_consistency, "ProcessGroupGlooOptions::check_consistency")
      ->capture_default_str();
  app.add_option("--small-message-bytes", small_message_bytes, "ProcessGroupGlooOptions::small_message_bytes")
      ->capture_default_str();
  app.add_option("--batch-transport-thread", batch_transport_thread,
                 "ProcessGroupGlooOptions::batch_transport_thread")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(threads);
    dist::InitOptions init;
    init.gloo.check_consistency = check_consistency;
    init.gloo.small_message_bytes = small_message_bytes;
    init.gloo.batch_transport_thread = batch_transport_thread;
    dist::init_process_group("gloo", init);
    const int rank = dist::get_rank();
    manual_seed(1234 + rank);
    const int64_t channels = model_name == "convnet" ? 1 : 3;
    Tensor x = randn({batch, channels, size, size});
    Tensor y = randint(0, 10, {batch});

    auto local = make_model(model_name);
    auto wrapped = make_model(model_name);
    dist::DDPOptions options;
    options.bucket_cap_mb = bucket_cap_mb;
    options.first_bucket_cap_mb = first_bucket_cap_mb;
    options.broadcast_buffers = broadcast_buffers;
    dist::DistributedDataParallel ddp(wrapped, nullptr, options);
    optim::SGD local_opt(local->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    optim::SGD ddp_opt(ddp->parameters(), optim::SGDOptions(0.01).momentum(0.9));

    // Phase times of the last step: forward (with DDP's buffer broadcast),
    // backward (with the gradient all-reduce), optimizer step.
    double phase[3] = {0, 0, 0};
    auto step = [&](nn::Module& model, optim::SGD& opt) {
      using Clock = std::chrono::steady_clock;
      auto ms = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
      };
      const auto t0 = Clock::now();
      opt.zero_grad();
      Tensor loss = cross_entropy(model.forward(x), y);
      const auto t1 = Clock::now();
      loss.backward();
      const auto t2 = Clock::now();
      opt.step();
      (void)loss.item<float>();
      const auto t3 = Clock::now();
      phase[0] = ms(t0, t1), phase[1] = ms(t1, t2), phase[2] = ms(t2, t3);
      return ms(t0, t3);
    };
    std::vector<double> phases[2][3];  // [local, ddp][forward, backward, step]
    for (int64_t i = 0; i < warmup; ++i) {
      step(*local, local_opt);
      step(*ddp, ddp_opt);
    }
    std::vector<double> local_ms, ddp_ms;
    for (int64_t r = 0; r < rounds; ++r) {
      dist::barrier();
      for (int64_t i = 0; i < block; ++i) {
        local_ms.push_back(step(*local, local_opt));
        for (int k = 0; k < 3; ++k) phases[0][k].push_back(phase[k]);
      }
      dist::barrier();
      for (int64_t i = 0; i < block; ++i) {
        ddp_ms.push_back(step(*ddp, ddp_opt));
        for (int k = 0; k < 3; ++k) phases[1][k].push_back(phase[k]);
      }
    }
    const double local_med = max_over_ranks(median(local_ms));
    const double ddp_med = max_over_ranks(median(ddp_ms));
    double phase_med[2][3];
    for (int m = 0; m < 2; ++m)
      for (int k = 0; k < 3; ++k) phase_med[m][k] = max_over_ranks(median(phases[m][k]));
    step(*ddp, ddp_opt);
    const dist::ReducerTimeline timeline = ddp->last_timeline();
    if (rank == 0) {
      std::printf("loom ddp_overhead model=%s ranks=%d batch_per_rank=%lld size=%lld threads=%d buckets=%zu "
                  "local_ms=%.2f ddp_ms=%.2f overhead_pct=%.1f\n",
                  model_name.c_str(), dist::get_world_size(), static_cast<long long>(batch),
                  static_cast<long long>(size), threads, ddp->bucket_sizes().size(), local_med, ddp_med,
                  100.0 * (ddp_med / local_med - 1.0));
      std::printf("median ms (slowest rank) forward/backward/step: local %.2f/%.2f/%.2f, DDP %.2f/%.2f/%.2f\n",
                  phase_med[0][0], phase_med[0][1], phase_med[0][2], phase_med[1][0], phase_med[1][1],
                  phase_med[1][2]);
      std::printf("timeline of one DDP step (ms after forward ended); backward ended at %.2f, grads averaged at %.2f\n",
                  timeline.ms(timeline.backward_end), timeline.ms(timeline.reduced));
      for (const auto& b : timeline.buckets) {
        std::printf("  bucket %zu  %8zu bytes  ready %7.2f  launched %7.2f  finished %7.2f%s\n", b.bucket, b.bytes,
                    timeline.ms(b.ready), timeline.ms(b.launched), timeline.ms(b.finished),
                    b.launched < timeline.backward_end ? "  (launched before backward ended)" : "");
      }
      std::fflush(stdout);
    }
    dist::destroy_process_group();
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
