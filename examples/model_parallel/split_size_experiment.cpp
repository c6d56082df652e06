// The experiment of PyTorch's "Single-Machine Model Parallel Best Practices":
// how long ResNet-50 takes to train on one device, split over two devices
// (model parallel), and pipelined over them, and how the pipeline's speed
// depends on split_size.
//
//   bazel run -c opt //examples/model_parallel:split_size_experiment --
//       --image-size 128 --batch-size 32 --num-batches 1   # a 2-core CPU
//   bazel run //examples/model_parallel:split_size_experiment -- --quick  # smoke run
//
// One run (the tutorial's train(model)): num_batches steps of MSELoss against
// one-hot labels + SGD(lr 0.001) on random images, model.train(True).  Each
// configuration is timed --repeats times after --warmup untimed runs, in
// rounds that run every configuration once (so a slow spell of the machine
// touches all of them alike, not whichever ran then); the
// table shows mean ± std seconds (population std, as numpy.std) and the
// speed-up over the single-device run; while measuring, each row also shows
// the time per run spent in forward, backward and the optimizer (zero_grad +
// step), which tells whether a stage or the step bounds the pipeline.  The
// random batches are made before
// the clock starts, so the times measure the model only.
//
// Rows: single-device (devices[0], --single-threads intra-op threads), model
// parallel, pipelined at --pipelined-split, then the sweep over
// --split-sizes for the plain pipeline (PipelineParallelResNet50) and the
// stream pipeline (StreamPipelineResNet50).  On CPU logical devices each device
// gets --threads-per-device intra-op threads, so the default compares one core
// against two devices of one core each.  On CUDA devices (--devices
// cuda:0,cuda:1, or cuda:0,cuda:0 for one GPU hosting both stages) every
// clock read first synchronizes the GPUs, since kernels run asynchronously.
//
// Output in --out-dir (default bench/split_size/out in the workspace):
//   results.csv      mode,split_size,mean_s,std_s,speedup,times_s (every row)
//   modes.csv        the bar chart's three bars
//   split_sizes.csv  split_size, plain and stream pipeline mean/std
//   modes.png, split_size.png  the tutorial's two figures, drawn by gnuplot
//   with bench/split_size/{modes,split_size}.gp when gnuplot is installed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "examples/common/ProgressBar.h"
#include "examples/model_parallel/Devices.h"
#include "examples/model_parallel/ModelParallelResNet50.h"
#include "examples/model_parallel/PipelineParallelResNet50.h"
#include "examples/model_parallel/StreamPipelineResNet50.h"
#include "loom.h"
#include "tensor/Stream.h"
#include "tensor/native/KernelProfile.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

struct Flags {
  std::string devices = "cpu:0,cpu:1";
  int64_t image_size = 128;
  int64_t batch_size = 120;
  int64_t num_batches = 3;
  int64_t num_classes = 1000;
  int64_t repeats = 10;
  // Three: the CPU caching allocator grows until every configuration's
  // blocks are cached; with one warm-up round the single device's first
  // timed run still paged in fresh memory (+0.25-0.45 s of 1.3 s).
  int64_t warmup = 3;
  std::string split_sizes = "1,3,5,8,10,12,20,40,60";
  int64_t pipelined_split = 20;
  int threads_per_device = 1;
  int single_threads = 1;
  std::string out_dir;
  uint64_t seed = 0;
  bool quick = false;
  bool no_plot = false;
  bool profile_stages = false;
  bool profile_kernels = false;
  bool no_defer_weight_grad = false;
  bool no_weight_reuse = false;
};

struct Batch {
  Tensor images;  // (B, 3, H, W)
  Tensor labels;  // (B, num_classes) one-hot
};

struct Row {
  std::string mode;     // single, model_parallel, pipelined, pipeline, stream_pipeline
  int64_t split_size;   // 0: no split
  std::vector<double> times;
  double mean = 0, std = 0;
};

// The tutorial's random batches: one set of one-hot indices, fresh images.
std::vector<Batch> make_batches(const Flags& f) {
  Generator gen(f.seed + 1);
  const Tensor indices = randint(0, f.num_classes, {f.batch_size}, kInt64, &gen);
  const auto idx = indices.to_vector<int64_t>();
  std::vector<Batch> batches;
  for (int64_t b = 0; b < f.num_batches; ++b) {
    Batch batch;
    batch.images = randn({f.batch_size, 3, f.image_size, f.image_size}, {}, &gen);
    batch.labels = zeros({f.batch_size, f.num_classes});
    float* l = batch.labels.data_ptr<float>();
    for (int64_t i = 0; i < f.batch_size; ++i) l[i * f.num_classes + idx[i]] = 1;
    batches.push_back(batch);
  }
  return batches;
}

// Seconds spent in forward, backward and the optimizer step (incl. zero_grad).
struct Phases {
  double forward = 0, backward = 0, step = 0;
};

// The clock, read once the devices have finished their queued work (CUDA
// kernels run asynchronously: without this a phase would be timed by its
// launches, and the next phase would pay for its GPU work).
std::chrono::steady_clock::time_point now(const std::vector<Device>& devices) {
  examples::synchronize_devices(devices);
  return std::chrono::steady_clock::now();
}

double seconds_since(std::chrono::steady_clock::time_point start,
                     const std::vector<Device>& devices) {
  return std::chrono::duration<double>(now(devices) - start).count();
}

// The tutorial's train(model); adds the time of each phase to `phases`.
// Inputs go to devices[0].
void train(nn::Module& model, const std::vector<Batch>& batches,
           const std::vector<Device>& devices, Phases& phases) {
  const Device input_device = devices[0];
  model.train(true);
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.001));
  for (const Batch& batch : batches) {
    auto t = now(devices);
    if (native::kernel_profiling()) native::set_kernel_profile_phase("step");
    optimizer.zero_grad();
    phases.step += seconds_since(t, devices);
    t = now(devices);
    if (native::kernel_profiling()) native::set_kernel_profile_phase("forward");
    Tensor outputs = model.forward(batch.images.to(input_device));
    Tensor labels = batch.labels.to(outputs.device());
    Tensor loss = mse_loss(outputs, labels);
    phases.forward += seconds_since(t, devices);
    t = now(devices);
    if (native::kernel_profiling()) native::set_kernel_profile_phase("backward");
    loss.backward();
    phases.backward += seconds_since(t, devices);
    t = now(devices);
    if (native::kernel_profiling()) native::set_kernel_profile_phase("step");
    optimizer.step();
    phases.step += seconds_since(t, devices);
  }
}

// One configuration to time: its row (mode, split size it runs at, times), the
// model and the intra-op threads per device it gets.
struct Config {
  Row row;
  nn::Module* model;
  int threads;
  Phases phases;
};

void use_threads(int threads, const std::vector<Device>& devices);

// Times every configuration `repeats` times, round-robin: round r runs each
// configuration once.  Measured one after the other instead, a drift in the
// machine's speed (a noisy neighbour on a shared host, seen to change run
// times by 20-40% for minutes) lands on whichever configurations ran then;
// interleaved, every configuration sees it alike, so the speed-ups compare
// like with like.
void measure_all(std::vector<Config>& configs, const std::vector<Batch>& batches,
                 const std::vector<Device>& devices, const Flags& f) {
  auto run_once = [&](Config& c) {
    use_threads(c.threads, devices);
    if (auto* pp = dynamic_cast<examples::PipelineParallelResNet50Impl*>(c.model))
      pp->set_split_size(c.row.split_size);
    const auto start = now(devices);
    train(*c.model, batches, devices, c.phases);
    return seconds_since(start, devices);
  };
  for (int64_t i = 0; i < f.warmup; ++i)
    for (Config& c : configs) run_once(c);
  for (Config& c : configs) c.phases = Phases();
  for (int64_t r = 0; r < f.repeats; ++r) {
    for (Config& c : configs) c.row.times.push_back(run_once(c));
    std::printf("  round %lld of %lld done\n", (long long)(r + 1), (long long)f.repeats);
    std::fflush(stdout);
  }
  const double n = static_cast<double>(f.repeats);
  for (Config& c : configs) {
    Row& row = c.row;
    for (double t : row.times) row.mean += t / row.times.size();
    for (double t : row.times) row.std += (t - row.mean) * (t - row.mean) / row.times.size();
    row.std = std::sqrt(row.std);
    std::printf("  %-16s split %-4s %8.3f s ± %.3f   (forward %.3f, backward %.3f, step %.3f)\n",
                row.mode.c_str(), row.split_size > 0 ? std::to_string(row.split_size).c_str() : "-",
                row.mean, row.std, c.phases.forward / n, c.phases.backward / n,
                c.phases.step / n);
  }
  std::fflush(stdout);
}

// Times each stage's forward and backward alone, one after the other on the
// calling thread (a full batch, no overlap), and prints the bound they put on
// any two-stage pipeline: (stage 1 + stage 2) / max(stage 1, stage 2).
void profile_stages(const nn::StateDict& weights, const std::vector<Batch>& batches,
                    const std::vector<Device>& devices, const Flags& f) {
  examples::ModelParallelResNet50 mp(f.num_classes, devices[0], devices[1]);
  mp->load_state_dict(weights);
  mp->train(true);
  double fwd1 = 0, bwd1 = 0, fwd2 = 0, bwd2 = 0;
  const int64_t runs = f.repeats + f.warmup;
  for (int64_t r = 0; r < runs; ++r) {
    const bool timed = r >= f.warmup;
    for (const Batch& batch : batches) {
      mp->zero_grad();
      const Tensor images = batch.images.to(devices[0]);
      auto t = now(devices);
      Tensor features = mp->stage1(images);
      const double a = seconds_since(t, devices);
      Tensor handed = features.detach().to(devices[1]).requires_grad_();
      t = now(devices);
      Tensor loss = mse_loss(mp->stage2(handed), batch.labels.to(devices[1]));
      const double b = seconds_since(t, devices);
      t = now(devices);
      loss.backward();
      const double c = seconds_since(t, devices);
      const Tensor grad = handed.grad().to(devices[0]);
      t = now(devices);
      features.backward(grad);
      const double d = seconds_since(t, devices);
      if (timed) {
        fwd1 += a;
        fwd2 += b;
        bwd2 += c;
        bwd1 += d;
      }
    }
  }
  const double n = static_cast<double>(f.repeats);
  const double s1 = (fwd1 + bwd1) / n, s2 = (fwd2 + bwd2) / n;
  std::printf("stages alone, per run: stage 1 (conv1..layer2) forward %.3f s + backward %.3f s = %.3f s; "
              "stage 2 (layer3..fc) forward %.3f s + backward %.3f s = %.3f s\n",
              fwd1 / n, bwd1 / n, s1, fwd2 / n, bwd2 / n, s2);
  std::printf("  -> a two-stage pipeline is at most %.2fx faster than running them in turn "
              "(without the optimizer step and the fill/drain bubble)\n",
              (s1 + s2) / std::max(s1, s2));
  std::fflush(stdout);
}

// Runs the single device and the pipelined configuration `repeats` more
// times each under the kernel profile (tensor/native/KernelProfile.h) and
// prints, per phase and kernel, the self time summed over the threads that
// ran it: what the pipeline's micro-batches cost in extra work, kernel by
// kernel, and how much of its two devices' time no kernel used (waiting in
// a bubble, or the engine's and streams' own work).
void profile_kernels(std::vector<Config>& configs, const std::vector<Batch>& batches,
                     const std::vector<Device>& devices, const Flags& f) {
  struct Profiled {
    double wall = 0;
    std::map<std::pair<std::string, std::string>, double> seconds;  // (phase, kernel)
  };
  auto profile = [&](Config& c) {
    use_threads(c.threads, devices);
    if (auto* pp = dynamic_cast<examples::PipelineParallelResNet50Impl*>(c.model))
      pp->set_split_size(c.row.split_size);
    Profiled p;
    Phases ignored;
    native::start_kernel_profile();
    const auto start = now(devices);
    for (int64_t r = 0; r < f.repeats; ++r) train(*c.model, batches, devices, ignored);
    p.wall = seconds_since(start, devices) / f.repeats;
    for (const native::KernelStat& s : native::stop_kernel_profile())
      p.seconds[{s.phase, s.name}] = s.seconds / f.repeats;
    return p;
  };
  Config* single = nullptr;
  Config* pipelined = nullptr;
  for (Config& c : configs) {
    if (c.row.mode == "single") single = &c;
    if (c.row.mode == "pipelined") pipelined = &c;
  }
  const Profiled a = profile(*single), b = profile(*pipelined);
  std::set<std::pair<std::string, std::string>> keys;
  for (const auto& [k, v] : a.seconds) keys.insert(k);
  for (const auto& [k, v] : b.seconds) keys.insert(k);
  std::vector<std::pair<std::string, std::string>> order(keys.begin(), keys.end());
  auto at = [](const Profiled& p, const std::pair<std::string, std::string>& k) {
    const auto it = p.seconds.find(k);
    return it == p.seconds.end() ? 0.0 : it->second;
  };
  std::sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    return std::max(at(a, x), at(b, x)) > std::max(at(a, y), at(b, y));
  });
  std::printf("\nkernel self time per run (s), summed over threads: "
              "single vs pipelined split %lld\n",
              (long long)pipelined->row.split_size);
  std::printf("  %-9s %-28s %9s %9s %9s\n", "phase", "kernel", "single", "pipelined", "extra");
  double total_a = 0, total_b = 0;
  for (const auto& k : order) {
    const double x = at(a, k), y = at(b, k);
    total_a += x;
    total_b += y;
    if (std::max(x, y) < 0.002) continue;
    std::printf("  %-9s %-28s %9.3f %9.3f %+9.3f\n", k.first.c_str(), k.second.c_str(), x, y,
                y - x);
  }
  std::printf("  %-38s %9.3f %9.3f %+9.3f\n", "all kernels", total_a, total_b, total_b - total_a);
  std::printf("  wall time per run: single %.3f s on 1 device; pipelined %.3f s on 2 devices "
              "= %.3f device-s, of which %.3f s in no kernel\n",
              a.wall, b.wall, 2 * b.wall, 2 * b.wall - total_b);
  std::fflush(stdout);
}

// Sets the intra-op threads: process default (main and autograd engine
// threads) and, on CPU logical devices, each device's stream workers.
void use_threads(int threads, const std::vector<Device>& devices) {
  set_num_threads(threads);
  for (const Device& d : devices)
    if (d.is_cpu()) set_device_num_threads(d, threads);
}

// Writes `text` to `path` through a temporary file, so a failed run never
// leaves half a file where a good one was.
void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    LOOM_CHECK(out.good(), "split_size_experiment: cannot write ", tmp.string());
    out << text;
    out.close();
    LOOM_CHECK(out.good(), "split_size_experiment: failed writing ", tmp.string());
  }
  fs::rename(tmp, path);
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

int run(const Flags& f) {
  const std::vector<Device> devices = examples::parse_devices(f.devices, 2, "--devices");
  const std::vector<int64_t> splits = examples::parse_positive_list(f.split_sizes, "--split-sizes");
  LOOM_CHECK(f.image_size >= 32, "--image-size: ResNet-50 needs at least 32 pixels, got ", f.image_size);
  LOOM_CHECK(f.pipelined_split >= 1, "--pipelined-split: must be positive, got ", f.pipelined_split);
  LOOM_CHECK(f.threads_per_device >= 1 && f.single_threads >= 1,
             "--threads-per-device and --single-threads must be positive");
  const fs::path out_dir = f.out_dir.empty() ? fs::path(examples::workspace_root()) / "bench/split_size/out"
                                             : fs::path(examples::user_path(f.out_dir));
  fs::create_directories(out_dir);

  manual_seed(f.seed);
  const std::vector<Batch> batches = make_batches(f);
  std::printf("split_size experiment: ResNet-50, %lld classes, batch %lld, %lldx%lld images, "
              "%lld batches per run, %lld repeats (+%lld warm-up)\n",
              (long long)f.num_classes, (long long)f.batch_size, (long long)f.image_size,
              (long long)f.image_size, (long long)f.num_batches, (long long)f.repeats,
              (long long)f.warmup);
  std::printf("single device: %s with %d threads; two devices: %s, %s with %d threads each\n",
              examples::device_name(devices[0]).c_str(), f.single_threads, examples::device_name(devices[0]).c_str(),
              examples::device_name(devices[1]).c_str(), f.threads_per_device);

  // Every model starts from the same weights.
  nn::models::ResNet reference = nn::models::resnet50(f.num_classes);
  const nn::StateDict weights = reference->state_dict();
  std::vector<Row> rows;

  nn::models::ResNet single = nn::models::resnet50(f.num_classes);
  single->load_state_dict(weights);
  single->to(devices[0]);
  reference = nullptr;
  use_threads(f.threads_per_device, devices);
  if (f.profile_stages) profile_stages(weights, batches, devices, f);
  examples::ModelParallelResNet50 mp(f.num_classes, devices[0], devices[1]);
  mp->load_state_dict(weights);
  examples::PipelineParallelResNet50 pp(f.pipelined_split, f.num_classes, devices[0], devices[1]);
  pp->load_state_dict(weights);
  pp->set_defer_weight_gradients(!f.no_defer_weight_grad);
  pp->set_reuse_weights(!f.no_weight_reuse);
  examples::StreamPipelineResNet50 sp(splits[0], f.num_classes, devices[0], devices[1]);
  sp->load_state_dict(weights);
  sp->set_defer_weight_gradients(!f.no_defer_weight_grad);
  sp->set_reuse_weights(!f.no_weight_reuse);

  // single, model parallel, pipelined at --pipelined-split, then the sweep
  // (the plain pipeline at --pipelined-split is the "pipelined" row itself).
  std::vector<Config> configs;
  const int per_device = f.threads_per_device;
  auto config = [](const char* mode, int64_t split, nn::Module* model, int threads) {
    return Config{Row{mode, split, {}}, model, threads, {}};
  };
  configs.push_back(config("single", 0, single.get(), f.single_threads));
  configs.push_back(config("model_parallel", 0, mp.get(), per_device));
  configs.push_back(config("pipelined", f.pipelined_split, pp.get(), per_device));
  std::vector<int64_t> sweep_splits = splits;
  std::sort(sweep_splits.begin(), sweep_splits.end());
  sweep_splits.erase(std::unique(sweep_splits.begin(), sweep_splits.end()), sweep_splits.end());
  for (int64_t s : sweep_splits)
    if (s != f.pipelined_split) configs.push_back(config("pipeline", s, pp.get(), per_device));
  for (int64_t s : sweep_splits)
    configs.push_back(config("stream_pipeline", s, sp.get(), per_device));
  measure_all(configs, batches, devices, f);
  if (f.profile_kernels) profile_kernels(configs, batches, devices, f);

  std::map<int64_t, Row> plain, stream;
  for (const Config& c : configs) {
    const Row& r = c.row;
    if (r.mode == "single" || r.mode == "model_parallel" || r.mode == "pipelined")
      rows.push_back(r);
    if (r.mode == "pipelined" &&
        std::binary_search(sweep_splits.begin(), sweep_splits.end(), r.split_size)) {
      Row same = r;  // the same configuration, a point of the sweep too
      same.mode = "pipeline";
      plain[r.split_size] = same;
    }
    if (r.mode == "pipeline") plain[r.split_size] = r;
    if (r.mode == "stream_pipeline") stream[r.split_size] = r;
  }
  for (const auto& [s, r] : plain) rows.push_back(r);
  for (const auto& [s, r] : stream) rows.push_back(r);

  // ---- table and CSV files ------------------------------------------------------------
  const double single_mean = rows[0].mean;
  std::printf("\n%-16s %6s %22s %9s\n", "mode", "split", "time per run (s)", "speed-up");
  std::ostringstream results;
  results << "mode,split_size,mean_s,std_s,speedup,times_s\n";
  for (const Row& r : rows) {
    const double speedup = single_mean / r.mean;
    std::printf("%-16s %6s %12.3f ± %7.3f %8.2fx\n", r.mode.c_str(),
                r.split_size > 0 ? std::to_string(r.split_size).c_str() : "-", r.mean, r.std, speedup);
    results << r.mode << ',' << r.split_size << ',' << r.mean << ',' << r.std << ',' << speedup << ',';
    for (size_t i = 0; i < r.times.size(); ++i) results << (i ? ";" : "") << r.times[i];
    results << '\n';
  }
  std::ostringstream modes;
  modes << "label,mean_s,std_s\n";
  const char* labels[] = {"Single device", "Model parallel", "Pipelined (split " };
  for (int i = 0; i < 3; ++i) {
    std::string label = labels[i];
    if (i == 2) label += std::to_string(f.pipelined_split) + ")";
    modes << '"' << label << "\"," << rows[i].mean << ',' << rows[i].std << '\n';
  }
  std::ostringstream sweep;
  sweep << "split_size,pipeline_mean_s,pipeline_std_s,stream_mean_s,stream_std_s\n";
  for (const auto& [s, r] : plain)
    sweep << s << ',' << r.mean << ',' << r.std << ',' << stream.at(s).mean << ',' << stream.at(s).std << '\n';
  write_file(out_dir / "results.csv", results.str());
  write_file(out_dir / "modes.csv", modes.str());
  write_file(out_dir / "split_sizes.csv", sweep.str());
  std::printf("\nwrote %s/{results,modes,split_sizes}.csv\n", out_dir.string().c_str());

  // ---- figures -------------------------------------------------------------------------
  const fs::path scripts = fs::path(examples::workspace_root()) / "bench/split_size";
  std::ostringstream vars;
  vars << "outdir=" << '"' << out_dir.string() << "\"; single=" << rows[0].mean
       << "; model_parallel=" << rows[1].mean << "; setup=\"ResNet-50, batch " << f.batch_size
       << ", " << f.image_size << "x" << f.image_size << ", " << examples::device_name(devices[0]) << " + "
       << examples::device_name(devices[1]) << "\"";
  std::vector<std::string> commands;
  for (const char* script : {"modes.gp", "split_size.gp"})
    commands.push_back("gnuplot -e " + shell_quote(vars.str()) + " " +
                       shell_quote((scripts / script).string()));
  if (!f.no_plot && have_gnuplot() && fs::exists(scripts / "modes.gp")) {
    for (const std::string& command : commands) {
      const int rc = std::system(command.c_str());
      if (rc != 0) std::fprintf(stderr, "warning: gnuplot failed (%d): %s\n", rc, command.c_str());
    }
    std::printf("drew %s/modes.png and %s/split_size.png\n", out_dir.string().c_str(),
                out_dir.string().c_str());
  } else {
    std::printf("to draw the figures (needs gnuplot), run from the workspace:\n");
    for (const std::string& command : commands) std::printf("  %s\n", command.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PyTorch's model-parallel split_size experiment (ResNet-50) with loom"};
  Flags f;
  app.add_option("--devices", f.devices, "The two devices (cpu:0,cpu:1 or cuda:0,cuda:1)")->capture_default_str();
  app.add_option("--image-size", f.image_size, "Image height and width")->capture_default_str();
  app.add_option("--batch-size", f.batch_size, "Images per batch")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--num-batches", f.num_batches, "Batches per timed run")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--num-classes", f.num_classes, "Classes (one-hot MSE targets)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--repeats", f.repeats, "Timed runs per configuration")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", f.warmup, "Untimed runs before timing")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--split-sizes", f.split_sizes, "Split sizes of the sweep")->capture_default_str();
  app.add_option("--pipelined-split", f.pipelined_split, "Split size of the 'pipelined' bar")->capture_default_str();
  app.add_option("--threads-per-device", f.threads_per_device, "Intra-op threads of each of the two devices")->capture_default_str();
  app.add_option("--single-threads", f.single_threads, "Intra-op threads of the single-device run")->capture_default_str();
  app.add_option("--out-dir", f.out_dir, "Where CSV and PNG files go (default: bench/split_size/out in the workspace)");
  app.add_option("--seed", f.seed, "Seed for weights and data")->capture_default_str();
  app.add_flag("--quick", f.quick, "Smoke configuration (flags given explicitly still win): 32x32 images, batch 8, 1 batch, 10 classes, 2 repeats, no warm-up, split sizes 2,4");
  app.add_flag("--no-plot", f.no_plot, "Do not call gnuplot");
  app.add_flag("--profile-stages", f.profile_stages,
               "Also time each stage's forward and backward alone (the balance bound on the pipeline)");
  app.add_flag("--profile-kernels", f.profile_kernels,
               "After timing, run the single device and the pipelined configuration again "
               "under the kernel profile and print each kernel's self time side by side");
  app.add_flag("--no-defer-weight-grad", f.no_defer_weight_grad,
               "Pipelines compute each micro-batch's weight gradients right after its input "
               "gradients (without: deferred to when the device would wait; "
               "autograd/DeferWeightGrad.h)");
  app.add_flag("--no-weight-reuse", f.no_weight_reuse,
               "Pipelines reorder each convolution's weights into oneDNN's layout for every "
               "micro-batch (without: once per step; tensor/WeightReuse.h)");
  CLI11_PARSE(app, argc, argv);
  if (f.quick) {
    // The smoke configuration, for flags not given explicitly.
    auto unless_given = [&app](const char* flag, auto& value, auto quick_value) {
      if (app.count(flag) == 0) value = quick_value;
    };
    unless_given("--image-size", f.image_size, 32);
    unless_given("--batch-size", f.batch_size, 8);
    unless_given("--num-batches", f.num_batches, 1);
    unless_given("--num-classes", f.num_classes, 10);
    unless_given("--repeats", f.repeats, 2);
    unless_given("--warmup", f.warmup, 0);
    unless_given("--split-sizes", f.split_sizes, std::string("2,4"));
    unless_given("--pipelined-split", f.pipelined_split, 4);
  }
  try {
    return run(f);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
