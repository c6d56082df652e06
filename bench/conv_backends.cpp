// Times loom's own float32 CPU convolution kernels (tensor/cpu/Convolution.h)
// beside oneDNN's (tensor/cpu/OneDnnConvolution.h: its own layouts, with the
// reorders from and to NCHW inside the timed region) on the convolution shapes
// of one training step, per shape and weighted by how often the model uses it,
// and the faster of the two per pass:
//   bazel run //bench:conv_backends -- [resnet50|resnet18] [reps] [batch] [image size]
// (default batch 16 at 224x224 for ResNet-50, 32 at 64x64 for ResNet-18;
// another image size scales every layer's spatial size with it, e.g. 128
// for the split_size experiment's shapes).
// Prints the best milliseconds per pass (forward, input gradient, weight
// gradient); 0 where a pass is not needed (the stem's input gradient).
// LOOM_BENCH_COLD=1 times every call with other data in the caches.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/cpu/Convolution.h"
#include "tensor/cpu/OneDnnConvolution.h"
#include "tensor/cpu/Winograd.h"

namespace {

using loom::cpu::ConvGeometry;

struct Shape {
  int64_t c, h, o, k, s, p, uses;
  bool first;  // the stem: no input gradient
};

// LOOM_BENCH_COLD=1: every timed call starts with caches holding other data
// (128 MB written first), as in a pipeline whose micro-batches stream every
// layer's weights and whose other stage shares the L3.
bool cold_caches() {
  static const bool cold = [] {
    const char* v = std::getenv("LOOM_BENCH_COLD");
    return v != nullptr && *v == '1';
  }();
  return cold;
}

void evict_caches() {
  static std::vector<float> other(size_t{32} << 20);
  static float value = 0.f;
  value += 1.f;
  std::fill(other.begin(), other.end(), value);
}

double best_ms(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    if (cold_caches()) evict_caches();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

ConvGeometry geometry(int64_t n, const Shape& s) {
  ConvGeometry g;
  g.batch = n;
  g.in_channels = s.c;
  g.height = g.width = s.h;
  g.out_channels = s.o;
  g.kernel_h = g.kernel_w = s.k;
  g.stride_h = g.stride_w = s.s;
  g.pad_h = g.pad_w = s.p;
  g.out_h = g.out_w = (s.h + 2 * s.p - s.k) / s.s + 1;
  return g;
}

struct Times {
  double fwd = 0, bwd_data = 0, bwd_weights = 0;
  double total() const { return fwd + bwd_data + bwd_weights; }
};

Times time_loom(const ConvGeometry& g, bool need_input, int reps, float* x, float* w, float* b,
                float* y, float* gy, float* gx, float* gw, float* gb) {
  Times t;
  t.fwd = best_ms(reps, [&] { loom::cpu::conv2d_forward<float>(g, x, w, b, y); });
  if (need_input)
    t.bwd_data = best_ms(reps, [&] {
      loom::cpu::conv2d_backward<float>(g, x, w, gy, gx, nullptr, nullptr);
    });
  t.bwd_weights = best_ms(
      reps, [&] { loom::cpu::conv2d_backward<float>(g, x, w, gy, nullptr, gw, gb); });
  return t;
}

// loom's Winograd F(2x2, 3x3) kernels (tensor/cpu/Winograd.h) where they
// apply, zeros elsewhere: weights transformed in every call (as without
// WeightReuse), or with LOOM_BENCH_KEEP_WEIGHTS=1 once (as a pipeline's
// micro-batches under WeightReuse).
Times time_winograd(const ConvGeometry& g, bool need_input, int reps, float* x, float* w,
                    float* b, float* y, float* gy, float* gx) {
  Times t;
  if (!loom::cpu::winograd_applies(g)) return t;
  loom::cpu::onednn::WeightVersion kept;
  if (const char* keep = std::getenv("LOOM_BENCH_KEEP_WEIGHTS"); keep && *keep == '1')
    kept = {std::make_shared<int>(0), 1, {}};
  t.fwd = best_ms(reps, [&] { loom::cpu::winograd_forward(g, x, w, b, y, kept); });
  if (need_input)
    t.bwd_data = best_ms(reps, [&] { loom::cpu::winograd_backward_data(g, w, gy, gx, kept); });
  return t;
}

// oneDNN's direct kernels in their own layouts, the reorders from and to
// NCHW included (tensor/cpu/OneDnnConvolution.h).
Times time_onednn(const ConvGeometry& g, bool need_input, int reps, float* x, float* w,
                  float* b, float* y, float* gy, float* gx, float* gw, float* gb) {
  namespace od = loom::cpu::onednn;
  Times t;
  const loom::DType f32 = loom::kFloat32;
  if (od::available(od::ConvPass::kForward, g, f32))
    t.fwd = best_ms(reps, [&] { od::conv2d_forward(g, f32, x, w, b, y); });
  if (need_input && od::available(od::ConvPass::kBackwardData, g, f32))
    t.bwd_data = best_ms(reps, [&] { od::conv2d_backward_data(g, f32, w, gy, gx); });
  if (od::available(od::ConvPass::kBackwardWeights, g, f32))
    t.bwd_weights =
        best_ms(reps, [&] { od::conv2d_backward_weights(g, f32, x, gy, gw, gb); });
  return t;
}

// The faster of the two per pass: what LOOM_CPU_CONV=auto's timing should
// pick (tensor/cpu/ConvChoice.h).
Times faster(const Times& a, const Times& b) {
  auto best = [](double x, double y) { return y > 0 && y < x ? y : x; };
  return {best(a.fwd, b.fwd), best(a.bwd_data, b.bwd_data), best(a.bwd_weights, b.bwd_weights)};
}

std::vector<Shape> resnet50() {
  return {
      {3, 224, 64, 7, 2, 3, 1, true},
      {64, 56, 64, 1, 1, 0, 1, false},     {64, 56, 64, 3, 1, 1, 3, false},
      {64, 56, 256, 1, 1, 0, 4, false},    {256, 56, 64, 1, 1, 0, 2, false},
      {256, 56, 128, 1, 1, 0, 1, false},   {128, 56, 128, 3, 2, 1, 1, false},
      {128, 28, 512, 1, 1, 0, 4, false},   {256, 56, 512, 1, 2, 0, 1, false},
      {512, 28, 128, 1, 1, 0, 3, false},   {128, 28, 128, 3, 1, 1, 3, false},
      {512, 28, 256, 1, 1, 0, 1, false},   {256, 28, 256, 3, 2, 1, 1, false},
      {256, 14, 1024, 1, 1, 0, 6, false},  {512, 28, 1024, 1, 2, 0, 1, false},
      {1024, 14, 256, 1, 1, 0, 5, false},  {256, 14, 256, 3, 1, 1, 5, false},
      {1024, 14, 512, 1, 1, 0, 1, false},  {512, 14, 512, 3, 2, 1, 1, false},
      {512, 7, 2048, 1, 1, 0, 3, false},   {1024, 14, 2048, 1, 2, 0, 1, false},
      {2048, 7, 512, 1, 1, 0, 2, false},   {512, 7, 512, 3, 1, 1, 2, false},
  };
}

std::vector<Shape> resnet18() {
  // batch 32, 64x64 input
  return {
      {3, 64, 64, 7, 2, 3, 1, true},      {64, 16, 64, 3, 1, 1, 4, false},
      {64, 16, 128, 3, 2, 1, 1, false},   {64, 16, 128, 1, 2, 0, 1, false},
      {128, 8, 128, 3, 1, 1, 3, false},   {128, 8, 256, 3, 2, 1, 1, false},
      {128, 8, 256, 1, 2, 0, 1, false},   {256, 4, 256, 3, 1, 1, 3, false},
      {256, 4, 512, 3, 2, 1, 1, false},   {256, 4, 512, 1, 2, 0, 1, false},
      {512, 2, 512, 3, 1, 1, 3, false},
  };
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "resnet50";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const bool r50 = model == "resnet50";
  const int64_t n = argc > 3 ? std::atoll(argv[3]) : r50 ? 16 : 32;
  const int64_t base_image = r50 ? 224 : 64;
  const int64_t image = argc > 4 ? std::atoll(argv[4]) : base_image;
  if (n < 1 || image < 32 || image % 32 != 0) {
    std::fprintf(stderr, "conv_backends: batch must be positive and the image size a multiple "
                         "of 32, got batch %lld, image %lld\n", (long long)n, (long long)image);
    return 2;
  }
  std::vector<Shape> shapes = r50 ? resnet50() : resnet18();
  for (Shape& s : shapes) s.h = s.h * image / base_image;
  std::printf("%s, %d threads, %s batch %lld, %lldx%lld images\n",
              loom::cpu::onednn::describe().c_str(), loom::get_num_threads(), model.c_str(),
              (long long)n, (long long)image, (long long)image);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  Times sum_loom, sum_wino, sum_dnnl, sum_auto;
  std::printf("%-22s %4s %26s %17s %26s %26s\n", "C,HW->O,k,s", "uses", "loom f/d/w ms",
              "Winograd f/d ms", "oneDNN f/d/w ms", "faster f/d/w ms");
  for (const Shape& s : shapes) {
    const ConvGeometry g = geometry(n, s);
    auto buf = [&](int64_t count) {
      std::vector<float> v(count);
      for (float& f : v) f = nd(rng);
      return v;
    };
    const int64_t xs = n * s.c * s.h * s.h, ws = s.o * s.c * s.k * s.k,
                  ys = n * s.o * g.out_h * g.out_w;
    auto x = buf(xs), w = buf(ws), b = buf(s.o), y = buf(ys), gy = buf(ys), gx = buf(xs),
         gw = buf(ws), gb = buf(s.o);
    char name[64];
    std::snprintf(name, sizeof name, "%lld,%lld->%lld,%lldx%lld,s%lld", (long long)s.c,
                  (long long)s.h, (long long)s.o, (long long)s.k, (long long)s.k, (long long)s.s);
    const Times l = time_loom(g, !s.first, reps, x.data(), w.data(), b.data(), y.data(),
                              gy.data(), gx.data(), gw.data(), gb.data());
    const Times d = time_onednn(g, !s.first, reps, x.data(), w.data(), b.data(), y.data(),
                                gy.data(), gx.data(), gw.data(), gb.data());
    const Times wg = time_winograd(g, !s.first, reps, x.data(), w.data(), b.data(), y.data(),
                                   gy.data(), gx.data());
    const Times c = faster(faster(l, wg), d);
    std::printf("%-22s %4lld %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n",
                name, (long long)s.uses, l.fwd, l.bwd_data, l.bwd_weights, wg.fwd, wg.bwd_data,
                d.fwd, d.bwd_data, d.bwd_weights, c.fwd, c.bwd_data, c.bwd_weights);
    for (auto [sum, t] : {std::pair<Times*, Times>{&sum_loom, l}, {&sum_wino, faster(l, wg)},
                          {&sum_dnnl, d}, {&sum_auto, c}}) {
      sum->fwd += s.uses * t.fwd;
      sum->bwd_data += s.uses * t.bwd_data;
      sum->bwd_weights += s.uses * t.bwd_weights;
    }
  }
  std::printf("\nper step (weighted by uses), ms: fwd / input grad / weight grad / total\n");
  for (auto [label, t] : {std::pair<const char*, Times>{"loom", sum_loom},
                          {"loom+wino", sum_wino}, {"oneDNN", sum_dnnl}, {"faster", sum_auto}})
    std::printf("  %-8s %8.1f %8.1f %8.1f %8.1f\n", label, t.fwd, t.bwd_data, t.bwd_weights,
                t.total());
  return 0;
}
