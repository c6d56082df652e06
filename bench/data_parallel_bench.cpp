// nn::DataParallel on CPU logical devices against one device (issue 16).
//
// ResNet-18 training steps (forward, cross-entropy, backward, SGD momentum)
// on random data, in these modes, each with its own copy of the same model:
//   single-1t     the model on devices[0], one intra-op thread
//   single-2t     the same with two threads: what a CPU user would otherwise run
//   dp            DataParallel over --devices, --threads-per-device each
//                 (replicas kept between steps, parameters sharing the
//                 module's host memory; buffers copied when they changed)
//   dp-copies     the same with every changed tensor copied (what kept
//                 replicas do on GPUs: Replication::kKeepCopies)
//   dp-broadcast  the same, every parameter and buffer copied into fresh
//                 memory each step (Replication::kBroadcastAll: PyTorch's
//                 broadcast traffic)
//   dp-reclone    the same, replicas cloned anew each step
//                 (Replication::kCloneEveryForward: PyTorch's replicate();
//                 clone() also re-runs the initialisers before it copies,
//                 which PyTorch's shallow module copies do not, so this
//                 overstates PyTorch's cost: dp-broadcast is the fair bound)
// Modes are timed in interleaved rounds (each mode --steps steps per round),
// so a slow spell of the machine does not land on one of them; the first
// round is a warm-up.  Then each DataParallel mode runs --eval-steps
// forwards in eval mode without grad (an inference loop), where kept
// replicas copy nothing at all.
//
//   bazel run -c opt //bench:data_parallel_bench            # the configuration
//   bazel run //bench:data_parallel_bench -- --size 32 --batch 8 --rounds 2 --steps 1 --eval-steps 2
//
// Prints one line per mode (median ms per step, images/s, what replication
// cost per step), then the speed-ups.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "loom.h"

using namespace loom;

namespace {

struct Mode {
  std::string name;
  int threads = 1;  // intra-op threads of the calling thread
  std::shared_ptr<nn::Module> model;
  nn::DataParallel dp{nullptr};
  std::unique_ptr<optim::SGD> opt;
  std::vector<double> step_ms, eval_ms;
  std::vector<double> step_cpu_ms;  // CPU time of the whole process per step
  // Replication cost summed over the timed steps.
  double build_ms = 0, copy_ms = 0;
  double bytes = 0;
  int64_t copied = 0, shared = 0, skipped = 0, built = 0;
};

std::vector<Device> parse_devices(const std::string& list) {
  std::vector<Device> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) out.emplace_back(item);
  LOOM_CHECK(out.size() >= 2, "--devices: expected at least 2 comma-separated devices, got \"",
             list, "\"");
  for (const Device& d : out)
    LOOM_CHECK(d.is_cpu(), "--devices: this benchmark times CPU logical devices, got ", d);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// CPU time used by every thread of the process so far: with steps of equal
// CPU time, the wall-clock speed-up of two devices is bounded by how evenly
// they share it, and a loaded machine cannot hide extra work.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void train_step(Mode& m, const Tensor& x, const Tensor& y, bool timed) {
  set_num_threads(m.threads);
  const double t0 = now_ms();
  const double c0 = cpu_ms();
  m.opt->zero_grad();
  Tensor logits = m.dp.is_empty() ? m.model->forward(x) : m.dp(x);
  Tensor loss = cross_entropy(logits, y);
  loss.backward();
  m.opt->step();
  (void)loss.item<float>();
  const double t1 = now_ms();
  const double c1 = cpu_ms();
  if (!timed) return;
  m.step_ms.push_back(t1 - t0);
  m.step_cpu_ms.push_back(c1 - c0);
  if (!m.dp.is_empty()) {
    const nn::ReplicationStats& s = m.dp->last_stats();
    m.build_ms += s.build_ms;
    m.copy_ms += s.copy_ms;
    m.bytes += static_cast<double>(s.bytes_copied);
    m.copied += s.tensors_copied;
    m.shared += s.tensors_shared;
    m.skipped += s.tensors_skipped;
    m.built += s.replicas_built;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DataParallel on CPU logical devices vs one device (ResNet-18 training steps)"};
  std::string model_name = "resnet18", devices_flag = "cpu:0,cpu:1", modes_flag;
  int64_t batch = 64, size = 64, classes = 10, rounds = 6, steps = 2, eval_steps = 4;
  int threads_per_device = 1;
  app.add_option("--model", model_name, "resnet18 | resnet50 | convnet")->capture_default_str();
  app.add_option("--batch", batch, "Images per step")->capture_default_str();
  app.add_option("--size", size, "Image height and width")->capture_default_str();
  app.add_option("--classes", classes, "Output classes")->capture_default_str();
  app.add_option("--devices", devices_flag, "DataParallel's devices")->capture_default_str();
  app.add_option("--threads-per-device", threads_per_device,
                 "Intra-op threads of each device in the dp modes")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds (the first is a warm-up)")->capture_default_str();
  app.add_option("--steps", steps, "Steps per mode per round")->capture_default_str();
  app.add_option("--eval-steps", eval_steps, "Timed eval forwards per dp mode (0: none)")
      ->capture_default_str();
  app.add_option("--modes", modes_flag,
                 "Comma-separated subset of single-1t,single-2t,dp,dp-copies,dp-broadcast,dp-reclone");
  CLI11_PARSE(app, argc, argv);
  try {
    LOOM_CHECK(rounds >= 2 && steps >= 1 && batch >= 1 && threads_per_device >= 1,
               "--rounds must be >= 2, --steps, --batch and --threads-per-device >= 1");
    const std::vector<Device> devices = parse_devices(devices_flag);
    for (const Device& d : devices) set_device_num_threads(d, threads_per_device);
    manual_seed(0);

    std::shared_ptr<nn::Module> base;
    int64_t channels = 3;
    if (model_name == "resnet18") {
      base = nn::models::resnet18(classes).ptr();
    } else if (model_name == "resnet50") {
      base = nn::models::resnet50(classes).ptr();
    } else if (model_name == "convnet") {
      base = nn::models::ConvNet(classes).ptr();
      channels = 1;
    } else {
      std::fprintf(stderr, "unknown model %s (resnet18 | resnet50 | convnet)\n", model_name.c_str());
      return 2;
    }
    base->to(devices[0]);
    Tensor x = randn({batch, channels, size, size}).to(devices[0]);
    Tensor y = randint(0, classes, {batch}).to(devices[0]);

    const std::vector<std::string> all{"single-1t", "single-2t", "dp", "dp-copies", "dp-broadcast",
                                       "dp-reclone"};
    std::vector<std::string> chosen = all;
    if (!modes_flag.empty()) {
      chosen.clear();
      std::stringstream in(modes_flag);
      std::string item;
      while (std::getline(in, item, ',')) {
        LOOM_CHECK(std::find(all.begin(), all.end(), item) != all.end(), "--modes: unknown mode \"",
                   item, "\"");
        chosen.push_back(item);
      }
    }
    std::vector<Mode> modes;
    for (const std::string& name : chosen) {
      Mode m;
      m.name = name;
      m.model = base->clone();
      m.threads = name == "single-2t" ? 2 : name == "single-1t" ? 1 : threads_per_device;
      if (name.rfind("dp", 0) == 0) {
        m.dp = nn::DataParallel(m.model, devices);
        if (name == "dp-copies") m.dp->set_replication(nn::Replication::kKeepCopies);
        if (name == "dp-broadcast") m.dp->set_replication(nn::Replication::kBroadcastAll);
        if (name == "dp-reclone") m.dp->set_replication(nn::Replication::kCloneEveryForward);
      }
      m.opt = std::make_unique<optim::SGD>(m.model->parameters(),
                                           optim::SGDOptions(0.01).momentum(0.9));
      modes.push_back(std::move(m));
    }

    std::string device_list;
    for (const Device& d : devices)
      device_list += (device_list.empty() ? "cpu:" : ",cpu:") + std::to_string(d.index);
    std::printf("data_parallel_bench: %s batch=%lld size=%lld classes=%lld devices=%s "
                "threads_per_device=%d rounds=%lld steps=%lld\n",
                model_name.c_str(), static_cast<long long>(batch), static_cast<long long>(size),
                static_cast<long long>(classes), device_list.c_str(), threads_per_device,
                static_cast<long long>(rounds), static_cast<long long>(steps));
    for (int64_t r = 0; r < rounds; ++r)
      for (Mode& m : modes)
        for (int64_t s = 0; s < steps; ++s) train_step(m, x, y, /*timed=*/r > 0);

    for (Mode& m : modes) {
      if (m.dp.is_empty() || eval_steps <= 0) continue;
      set_num_threads(m.threads);
      NoGradGuard no_grad;
      m.model->eval();
      (void)m.dp(x);  // copies what the training steps changed
      for (int64_t s = 0; s < eval_steps; ++s) {
        const double t0 = now_ms();
        (void)m.dp(x).sum().item<float>();
        m.eval_ms.push_back(now_ms() - t0);
      }
      m.model->train();
    }

    auto find = [&](const std::string& name) -> const Mode* {
      for (const Mode& m : modes)
        if (m.name == name) return &m;
      return nullptr;
    };
    for (const Mode& m : modes) {
      const double ms = median(m.step_ms);
      const double n = static_cast<double>(m.step_ms.size());
      std::printf("mode=%-12s threads=%d ms_per_step=%.1f cpu_ms_per_step=%.1f images_per_s=%.1f",
                  m.name.c_str(), m.threads, ms, median(m.step_cpu_ms), batch * 1000.0 / ms);
      if (!m.dp.is_empty()) {
        std::printf(" build_ms=%.2f copy_ms=%.2f copied_mib=%.1f tensors_copied=%.0f "
                    "shared=%.0f skipped=%.0f built=%.2f eval_ms=%.1f",
                    m.build_ms / n, m.copy_ms / n, m.bytes / n / (1024.0 * 1024.0), m.copied / n,
                    m.shared / n, m.skipped / n, m.built / n, median(m.eval_ms));
      }
      std::printf("\n");
    }
    auto ratio = [&](const char* a, const char* b, const char* note) {
      const Mode* fast = find(a);
      const Mode* slow = find(b);
      if (!fast || !slow) return;
      std::printf("speedup %s vs %s: %.2fx%s\n", a, b, median(slow->step_ms) / median(fast->step_ms),
                  note);
    };
    ratio("dp", "single-1t", " (issue 16 asks >= 1.6x)");
    ratio("dp", "single-2t", "");
    ratio("dp", "dp-copies", " (shared host memory vs copies of changed tensors)");
    ratio("dp", "dp-broadcast", " (kept replicas vs PyTorch-style broadcast every step)");
    ratio("dp", "dp-reclone", " (kept replicas vs replicas cloned every step)");
    const Mode* dp = find("dp");
    for (const char* other : {"dp-copies", "dp-broadcast", "dp-reclone"}) {
      const Mode* o = find(other);
      if (!dp || !o || dp->eval_ms.empty() || o->eval_ms.empty()) continue;
      std::printf("eval forward dp vs %s: %.1f ms vs %.1f ms (%.2fx)\n", other, median(dp->eval_ms),
                  median(o->eval_ms), median(o->eval_ms) / median(dp->eval_ms));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
