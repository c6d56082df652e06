// One training step (forward, cross-entropy, backward, SGD momentum step) of
// a zoo model on random data, timed over many iterations after a warm-up, on
// the CPU or a GPU.  Prints one line:
//   loom <model> device=<d> batch=<B> size=<S> threads=<T> tf32=<0|1>
//        ms_per_step=<median> mean=<mean> images_per_s=<B / median> peak_mib=<P>
// With --amp bf16|fp16 the forward and the loss run under amp::AutocastGuard
// (the CPU takes bf16) and the line ends with amp=<dtype>; fp16 also scales
// the loss with amp::GradScaler (PyTorch's AMP recipe: scale, step, update).
// peak_mib is the caching allocator's peak of allocated bytes during the
// timed steps (the CUDA one on a GPU, the CPU one (tensor/CpuMemory.h) on the
// CPU).  faults_per_step is the process's page faults (getrusage, minor +
// major) per timed step, rss_mib its peak resident set at the end.  The step ends with loss.item(), a
// host sync, so on a GPU every step's kernels are inside its time.
// --cudnn-channels-last 0 runs 16-bit CUDA convolutions NCHW instead of
// channels last (cuda::set_cudnn_channels_last; CUDA lines end with
// cudnn_channels_last=<0|1>).
// On the CPU the line ends with onednn=<version>/<isa>: the oneDNN build and
// the instruction set its kernels run here (avx512_core_amx where the CPU has
// AMX tiles and the kernel grants them, avx512_core_bf16, ...).
// bench/compare_train_step.sh runs it beside the PyTorch twin (train_step.py);
// bench/gpu/run.sh runs both on a GPU machine.  --profile adds, after the
// line, each phase's kernels (native/KernelProfile.h: self time per dispatch
// slot, ms per step over the timed steps; on a GPU each op's GPU time, the
// device synchronized around it) and the time outside them, as
// train_step.py --profile does from PyTorch's profiler.
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "loom.h"
#include "tensor/cpu/ConvChoice.h"
#include "tensor/cpu/OneDnnConvolution.h"
#include "tensor/native/KernelProfile.h"

using namespace loom;

namespace {
// Per phase, the kernels above 0.5% of the step, in ms per step.
void print_profile(const std::vector<native::KernelStat>& stats, int64_t iters, double step_ms) {
  double in_kernels = 0;
  for (const auto& s : stats) in_kernels += s.seconds;
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    double total = 0;
    for (const auto& s : stats)
      if (s.phase == phase) total += s.seconds;
    std::printf("profile %-9s kernels %8.2f ms\n", phase, total * 1e3 / iters);
    for (const auto& s : stats) {
      const double ms = s.seconds * 1e3 / iters;
      if (s.phase != phase || ms < 0.005 * step_ms) continue;
      std::printf("profile %-9s   %-26s %8.2f ms %6.1f calls\n", phase, s.name.c_str(), ms,
                  static_cast<double>(s.calls) / iters);
    }
  }
  std::printf("profile outside kernels %8.2f ms (of %.2f ms mean step)\n",
              step_ms - in_kernels * 1e3 / iters, step_ms);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time a loom training step"};
  std::string model_name = "convnet", device_name = "cpu";
  int64_t batch = 128, size = 28, iters = 30, warmup = 5, classes = 10;
  int threads = 2;
  bool tf32 = true;
  std::string amp = "none";
  app.add_option("--model", model_name, "convnet | resnet18 | resnet50")->capture_default_str();
  app.add_option("--device", device_name, "cpu or cuda[:N]")->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--size", size, "Image height and width")->capture_default_str();
  app.add_option("--classes", classes, "Output classes")->capture_default_str();
  app.add_option("--iters", iters)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--threads", threads, "Intra-op CPU threads")->capture_default_str();
  app.add_option("--tf32", tf32, "TF32 in cuBLAS and cuDNN (CUDA only)")->capture_default_str();
  app.add_option("--amp", amp, "Autocast the forward and loss: none, bf16 or fp16")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "bf16", "fp16"}));
  bool cudnn_channels_last = true;
  app.add_option("--cudnn-channels-last", cudnn_channels_last,
                 "16-bit CUDA convolutions channels last (cuda::set_cudnn_channels_last)")
      ->capture_default_str();
  bool profile = false;
  app.add_flag("--profile", profile, "Print each phase's kernel times per step");
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(threads);
    manual_seed(0);
    const Device device(device_name);
    cuda::set_matmul_allow_tf32(tf32);
    cuda::set_cudnn_allow_tf32(tf32);
    cuda::set_cudnn_benchmark(true);
    cuda::set_cudnn_channels_last(cudnn_channels_last);

    std::shared_ptr<nn::Module> model;
    int64_t channels = 3;
    if (model_name == "convnet") {
      model = nn::models::ConvNet().ptr();
      channels = 1;
    } else if (model_name == "resnet18") {
      model = nn::models::resnet18(classes).ptr();
    } else if (model_name == "resnet50") {
      model = nn::models::resnet50(classes).ptr();
    } else {
      std::fprintf(stderr, "unknown model %s (convnet | resnet18 | resnet50)\n", model_name.c_str());
      return 2;
    }
    model->to(device);
    Tensor x = randn({batch, channels, size, size}).to(device);
    Tensor y = randint(0, classes, {batch}).to(device);
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    amp::GradScalerOptions scaler_options;
    scaler_options.enabled = amp == "fp16";
    amp::GradScaler scaler(scaler_options);
    std::vector<double> ms;
    const auto faults = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return static_cast<int64_t>(u.ru_minflt + u.ru_majflt);
    };
    int64_t faults_at_warmup = 0;
    for (int64_t i = 0; i < warmup + iters; ++i) {
      if (i == warmup) {
        if (device.is_cuda()) cuda::reset_peak_memory_stats(device.index);
        cpu::reset_peak_memory_stats();
        faults_at_warmup = faults();
        if (profile) native::start_kernel_profile();
      }
      const auto phase = [&](const char* name) {
        if (profile && i >= warmup) native::set_kernel_profile_phase(name);
      };
      const auto t0 = std::chrono::steady_clock::now();
      phase("optimizer");
      opt.zero_grad();
      Tensor loss;
      {
        phase("forward");
        std::optional<amp::AutocastGuard> autocast;
        if (amp != "none") autocast.emplace(device.type, amp == "bf16" ? kBFloat16 : kFloat16);
        loss = cross_entropy(model->forward(x), y);
      }
      phase("backward");
      scaler.scale(loss).backward();
      phase("optimizer");
      scaler.step(opt);
      scaler.update();
      (void)loss.item<float>();
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double v : ms) mean += v;
    mean /= static_cast<double>(ms.size());
    const double median = sorted[sorted.size() / 2];
    const double faults_per_step =
        static_cast<double>(faults() - faults_at_warmup) / static_cast<double>(iters);
    const double peak_mib = (device.is_cuda() ? cuda::max_memory_allocated(device.index)
                                              : cpu::max_memory_allocated()) /
                            (1024.0 * 1024.0);
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const double rss_mib = static_cast<double>(u.ru_maxrss) / 1024.0;
    std::printf(
        "loom %s device=%s batch=%lld size=%lld threads=%d tf32=%d ms_per_step=%.2f mean=%.2f "
        "images_per_s=%.1f peak_mib=%.1f faults_per_step=%.0f rss_mib=%.0f%s "
        "conv_onednn=%lld/%lld%s%s\n",
        model_name.c_str(), device_name.c_str(), static_cast<long long>(batch),
        static_cast<long long>(size), threads, tf32 ? 1 : 0, median, mean, batch * 1000.0 / median,
        peak_mib, faults_per_step, rss_mib, amp == "none" ? "" : (" amp=" + amp).c_str(),
        static_cast<long long>(cpu::conv_choice_stats().onednn),
        static_cast<long long>(cpu::conv_choice_stats().decided),
        device.is_cpu()
            ? (" onednn=" + cpu::onednn::version() + "/" + cpu::onednn::effective_isa()).c_str()
            : "",
        device.is_cuda() ? (cudnn_channels_last ? " cudnn_channels_last=1" : " cudnn_channels_last=0")
                         : "");
    if (profile) print_profile(native::stop_kernel_profile(), iters, mean);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
