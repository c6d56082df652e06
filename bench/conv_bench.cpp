// Times loom's compute-heavy kernels on the shapes of the MNIST ConvNet
// (batch 128, 28x28) and full training steps of that ConvNet and of
// ResNet-18 (batch 32, 64x64), to compare with PyTorch on the same machine:
//   bazel run //bench:conv_bench -- [ops|convnet|resnet] [threads]
//   bazel run -c opt //bench:conv_bench -- bn-fusion 2   (fused batch norm
//     kernels against the separate ops, ResNet-50 stage-1 shape)
// Prints the best and median milliseconds of several repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "loom.h"
#include "tensor/cpu/Gemm.h"
#include "tensor/native/Convolution.h"
#include "tensor/native/Normalization.h"
#include "tensor/native/Pooling.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Unary.h"
#include "nn/models/ConvNet.h"
#include "nn/models/ResNet.h"
#include "optim/SGD.h"

using namespace loom;

namespace {

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Wall time (best and median), and the process CPU time per repetition: on a
// loaded machine the CPU time divided by the thread count is the steadier number.
void time_it(const char* name, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> ms;
  const double cpu0 = cpu_seconds();
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  const double cpu_ms = (cpu_seconds() - cpu0) * 1e3 / reps;
  std::sort(ms.begin(), ms.end());
  std::printf("%-34s best %8.3f ms   median %8.3f ms   cpu %8.3f ms\n", name, ms[0],
              ms[ms.size() / 2], cpu_ms);
}

void ops() {
  Generator gen(1);
  const Tensor x1 = randn({128, 1, 28, 28}, kFloat32, &gen);
  const Tensor w1 = randn({16, 1, 5, 5}, kFloat32, &gen).requires_grad_();
  const Tensor b1 = randn({16}, kFloat32, &gen).requires_grad_();
  const Tensor x2 = randn({128, 16, 14, 14}, kFloat32, &gen).requires_grad_();
  const Tensor w2 = randn({32, 16, 5, 5}, kFloat32, &gen).requires_grad_();
  const Tensor b2 = randn({32}, kFloat32, &gen).requires_grad_();
  time_it("conv1 fwd", 20, [&] { NoGradGuard g; conv2d(x1, w1, b1, {1, 1}, {2, 2}); });
  time_it("conv1 fwd+bwd (no grad_input)", 20,
          [&] { conv2d(x1, w1, b1, {1, 1}, {2, 2}).sum().backward(); });
  time_it("conv2 fwd", 20, [&] { NoGradGuard g; conv2d(x2, w2, b2, {1, 1}, {2, 2}); });
  time_it("conv2 fwd+bwd", 20, [&] { conv2d(x2, w2, b2, {1, 1}, {2, 2}).sum().backward(); });
  const Tensor xb = randn({128, 16, 28, 28}, kFloat32, &gen).requires_grad_();
  const Tensor wb = ones({16}).requires_grad_(), bb = zeros({16}).requires_grad_();
  Tensor rm = zeros({16}), rv = ones({16});
  time_it("bn1 fwd+bwd", 20, [&] { batch_norm(xb, rm, rv, wb, bb, true).sum().backward(); });
  time_it("maxpool1 fwd+bwd", 20, [&] { max_pool2d(xb, {2, 2}).sum().backward(); });
  const Tensor xl = randn({128, 1568}, kFloat32, &gen).requires_grad_();
  const Tensor wl = randn({10, 1568}, kFloat32, &gen).requires_grad_();
  const Tensor bl = randn({10}, kFloat32, &gen).requires_grad_();
  time_it("linear fwd+bwd", 20, [&] { linear(xl, wl, bl).sum().backward(); });
  const Tensor ones1 = ones({128, 16, 28, 28});
  time_it("  (sum+backward overhead 1.6M)", 20, [&] { (xb * 1.0f).sum().backward(); });
}

template <typename Model>
void train_steps(const char* name, Model& model, const Tensor& x, const Tensor& y, int reps) {
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  time_it(name, reps, [&] {
    opt.zero_grad();
    const Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "ops";
  set_num_threads(argc > 2 ? std::atoi(argv[2]) : 2);
  std::printf("threads %d, AVX-512 GEMM %s\n", get_num_threads(),
              cpu::gemm_uses_avx512() ? "on" : "off");
  manual_seed(0);
  if (what == "ops") ops();
  if (what == "pool" || what == "bn") {
    Generator gen(1);
    const Tensor x = randn({128, 16, 28, 28}, kFloat32, &gen);
    const Tensor go = randn({128, 16, 14, 14}, kFloat32, &gen);
    auto [y, idx] = native::max_pool2d_with_indices(x, {2, 2}, {}, {0, 0}, {1, 1}, false);
    time_it("maxpool 2x2 fwd (native)", 50,
            [&] { native::max_pool2d_with_indices(x, {2, 2}, {}, {0, 0}, {1, 1}, false); });
    time_it("maxpool 2x2 bwd (native)", 50, [&] {
      native::max_pool2d_backward(go, x.sizes(), {2, 2}, {}, {0, 0}, {1, 1}, false, idx);
    });
    const Tensor w = ones({16}), b = zeros({16});
    Tensor rm = zeros({16}), rv = ones({16});
    time_it("batchnorm fwd (native)", 50,
            [&] { native::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5); });
    auto [out, mean, invstd] = native::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    Tensor gi, gw, gb;
    time_it("batchnorm bwd (native)", 50, [&] {
      native::batch_norm_backward(x, x, w, mean, invstd, true, true, true, true, gi, gw, gb);
    });
    time_it("empty 6.4MB + fill", 50, [&] { empty({128, 16, 28, 28}).fill_(1.0f); });
  }
  if (what == "bn-fusion") {
    // ResNet-50's first-stage batch norms (batch 16, 256 x 56 x 56): the
    // fused kernels against the separate ops they replace, float32 NCHW and
    // bfloat16 channels last.
    Generator gen(2);
    for (DType dtype : {kFloat32, kBFloat16}) {
      const MemoryFormat format = dtype == kBFloat16 ? MemoryFormat::kChannelsLast
                                                     : MemoryFormat::kContiguous;
      const char* tag = dtype == kBFloat16 ? "bf16 NHWC" : "f32 NCHW";
      const Tensor x = randn({16, 256, 56, 56}, kFloat32, &gen).to(dtype).contiguous(format);
      const Tensor r = randn({16, 256, 56, 56}, kFloat32, &gen).to(dtype).contiguous(format);
      const Tensor go = randn({16, 256, 56, 56}, kFloat32, &gen).to(dtype).contiguous(format);
      const Tensor w = ones({256}), b = zeros({256});
      Tensor rm = zeros({256}), rv = ones({256});
      const auto relu = native::unary_op<optable::Relu>();
      auto label = [&](const char* what) { return std::string(what) + " " + tag; };
      time_it(label("bn+add+relu fused").c_str(), 10, [&] {
        native::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5, true, r);
      });
      time_it(label("bn, add, relu").c_str(), 10, [&] {
        Tensor y = std::get<0>(native::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5));
        y = native::binary(native::binary_op<optable::Add>(), y, r);
        native::unary_(relu, y, {});
      });
      auto [y, mean, invstd] = native::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5, true);
      Tensor gi, gw, gb;
      time_it(label("bn+relu backward fused").c_str(), 10, [&] {
        native::batch_norm_backward(go, x, w, mean, invstd, true, true, true, true, gi, gw, gb, y);
      });
      time_it(label("relu backward, bn backward").c_str(), 10, [&] {
        const Tensor g = native::unary_backward(relu, go, y, {});
        native::batch_norm_backward(g, x, w, mean, invstd, true, true, true, true, gi, gw, gb);
      });
    }
  }
  if (what == "resnet-convs") {
    // Every distinct convolution of ResNet-18 at batch 32, 64x64 input:
    // {C, H, O, k, stride, pad}; forward + backward (grad_input except conv1).
    const std::vector<std::vector<int64_t>> shapes = {
        {3, 64, 64, 7, 2, 3},   {64, 16, 64, 3, 1, 1},  {64, 16, 128, 3, 2, 1},
        {128, 8, 128, 3, 1, 1}, {64, 16, 128, 1, 2, 0}, {128, 8, 256, 3, 2, 1},
        {256, 4, 256, 3, 1, 1}, {128, 8, 256, 1, 2, 0}, {256, 4, 512, 3, 2, 1},
        {512, 2, 512, 3, 1, 1}, {256, 4, 512, 1, 2, 0}};
    Generator gen(3);
    const int only = argc > 3 ? std::atoi(argv[3]) : -1;
    int index = -1;
    for (const auto& sh : shapes) {
      if (++index, only >= 0 && index != only) continue;
      Tensor x = randn({32, sh[0], sh[1], sh[1]}, kFloat32, &gen);
      if (sh[0] != 3) x.requires_grad_();
      const Tensor w = randn({sh[2], sh[0], sh[3], sh[3]}, kFloat32, &gen).requires_grad_();
      const std::string name = "C" + std::to_string(sh[0]) + " H" + std::to_string(sh[1]) + " O" +
                               std::to_string(sh[2]) + " k" + std::to_string(sh[3]) + " s" +
                               std::to_string(sh[4]);
      time_it(name.c_str(), 5, [&] {
        conv2d(x, w, Tensor(), {sh[4], sh[4]}, {sh[5], sh[5]}).sum().backward();
      });
    }
  }
  if (what == "resnet50-small-maps") {
    // ResNet-50's layer3/layer4 convolutions at 128x128 input (8x8 and 4x4
    // maps) at batch 4 and 32: milliseconds per image, forward + backward with
    // grad_input, to see what micro-batches cost (the split_size experiment).
    const std::vector<std::vector<int64_t>> shapes = {
        {1024, 8, 256, 1, 1, 0}, {256, 8, 256, 3, 1, 1}, {256, 8, 1024, 1, 1, 0},
        {2048, 4, 512, 1, 1, 0}, {512, 4, 512, 3, 1, 1}, {512, 4, 2048, 1, 1, 0}};
    Generator gen(3);
    for (const auto& sh : shapes) {
      for (int64_t batch : {4, 32}) {
        Tensor x = randn({batch, sh[0], sh[1], sh[1]}, kFloat32, &gen).requires_grad_();
        const Tensor w = randn({sh[2], sh[0], sh[3], sh[3]}, kFloat32, &gen).requires_grad_();
        const std::string name = "C" + std::to_string(sh[0]) + " H" + std::to_string(sh[1]) +
                                 " O" + std::to_string(sh[2]) + " k" + std::to_string(sh[3]) +
                                 " batch " + std::to_string(batch);
        time_it(name.c_str(), batch == 4 ? 40 : 5, [&] {
          conv2d(x, w, Tensor(), {sh[4], sh[4]}, {sh[5], sh[5]}).sum().backward();
        });
      }
    }
  }
  if (what == "resnet50-stage1" || what == "resnet50-stage2") {
    // The split_size experiment's stages (ResNet-50 at 128x128 input; stage 1
    // = conv1 + layer1 + layer2, stage 2 = layer3 + layer4) by phase: the
    // whole batch of 32 in one call against micro-batches (argument 3,
    // default 4), per conv shape times its count in the stage, in ms per
    // batch of 32.  Forward, input gradient, weight gradient.
    // {C, H, O, k, stride, pad, count}
    const std::vector<std::vector<int64_t>> stage1 = {
        {3, 128, 64, 7, 2, 3, 1},   {64, 32, 64, 1, 1, 0, 1},   {64, 32, 64, 3, 1, 1, 3},
        {64, 32, 256, 1, 1, 0, 4},  {256, 32, 64, 1, 1, 0, 2},  {256, 32, 128, 1, 1, 0, 1},
        {128, 32, 128, 3, 2, 1, 1}, {128, 16, 512, 1, 1, 0, 4}, {256, 32, 512, 1, 2, 0, 1},
        {512, 16, 128, 1, 1, 0, 3}, {128, 16, 128, 3, 1, 1, 3}};
    const std::vector<std::vector<int64_t>> stage2 = {
        {512, 16, 256, 1, 1, 0, 1},  {256, 16, 256, 3, 2, 1, 1}, {256, 8, 1024, 1, 1, 0, 6},
        {512, 16, 1024, 1, 2, 0, 1}, {1024, 8, 256, 1, 1, 0, 5}, {256, 8, 256, 3, 1, 1, 5},
        {1024, 8, 512, 1, 1, 0, 1},  {512, 8, 512, 3, 2, 1, 1},  {512, 4, 2048, 1, 1, 0, 3},
        {1024, 8, 2048, 1, 2, 0, 1}, {2048, 4, 512, 1, 1, 0, 2}, {512, 4, 512, 3, 1, 1, 2}};
    const auto& shapes = what == "resnet50-stage1" ? stage1 : stage2;
    const int64_t micro = argc > 3 ? std::atoll(argv[3]) : 4;
    Generator gen(3);
    double totals[2][3] = {};
    for (const auto& sh : shapes) {
      const IntList stride{sh[4], sh[4]}, pad{sh[5], sh[5]}, dil{1, 1};
      const Tensor w = randn({sh[2], sh[0], sh[3], sh[3]}, kFloat32, &gen);
      for (int part = 0; part < 2; ++part) {
        const int64_t batch = part == 0 ? 32 : micro, pieces = 32 / batch;
        const Tensor x = randn({batch, sh[0], sh[1], sh[1]}, kFloat32, &gen);
        const Tensor go = randn(native::conv2d(x, w, Tensor(), stride, pad, dil, 1).sizes(),
                                kFloat32, &gen);
        Tensor gi, gw, gb;
        auto best_ms = [&](const std::function<void()>& fn) {
          double best = 1e30;
          for (int r = 0; r < 4; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int64_t p = 0; p < pieces; ++p) fn();
            best = std::min(best, std::chrono::duration<double, std::milli>(
                                      std::chrono::steady_clock::now() - t0).count());
          }
          return best * sh[6];
        };
        const double f = best_ms([&] { native::conv2d(x, w, Tensor(), stride, pad, dil, 1); });
        const double i = best_ms([&] {
          native::conv2d_backward(go, x, w, stride, pad, dil, 1, true, false, false, gi, gw, gb);
        });
        const double g = best_ms([&] {
          native::conv2d_backward(go, x, w, stride, pad, dil, 1, false, true, false, gi, gw, gb);
        });
        totals[part][0] += f;
        totals[part][1] += i;
        totals[part][2] += g;
        std::printf("  C%-4lld H%-2lld O%-4lld k%lld s%lld x%lld  batch %2lld: %6.1f %6.1f %6.1f ms\n",
                    (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)sh[3],
                    (long long)sh[4], (long long)sh[6], (long long)batch, f, i, g);
      }
    }
    for (int part = 0; part < 2; ++part)
      std::printf("%s convs, %s: forward %7.1f ms  input grad %7.1f ms  weight grad %7.1f ms\n",
                  what.c_str() + 9, part == 0 ? "batch 32" : (std::to_string(32 / micro) + " x micro-batch " + std::to_string(micro)).c_str(),
                  totals[part][0], totals[part][1], totals[part][2]);
  }
  if (what == "conv2") {
    Generator gen(1);
    const Tensor x2 = randn({128, 16, 14, 14}, kFloat32, &gen).requires_grad_();
    const Tensor w2 = randn({32, 16, 5, 5}, kFloat32, &gen).requires_grad_();
    const Tensor b2 = randn({32}, kFloat32, &gen).requires_grad_();
    time_it("conv2 fwd", 50, [&] { NoGradGuard g; conv2d(x2, w2, b2, {1, 1}, {2, 2}); });
    time_it("conv2 fwd+bwd", 50, [&] { conv2d(x2, w2, b2, {1, 1}, {2, 2}).sum().backward(); });
  }
  if (what == "convnet") {
    nn::models::ConvNet model(10);
    const Tensor x = randn({128, 1, 28, 28});
    const Tensor y = randint(0, 10, {128});
    train_steps("ConvNet train step (batch 128)", model, x, y, 20);
  }
  if (what == "resnet") {
    auto model = nn::models::resnet18(10);
    const Tensor x = randn({32, 3, 64, 64});
    const Tensor y = randint(0, 10, {32});
    train_steps("ResNet-18 train step (32x3x64x64)", model, x, y, 10);
  }
  return 0;
}
