// A ResNet-18 training step on CUDA against the same step on the CPU, from
// the same weights: the whole path the GPU benchmarks time (cuDNN
// convolutions, batch norm fused with ReLU and the residual add, pooling,
// linear, cross entropy, their backward, SGD) checked as one.  float32 (TF32
// off): the CPU's results within 5e-4 of each result's largest value.  Under
// autocast a gradient's elements differ from float32 by tens of percent on
// either device (batch norm over 16 values a channel in the last stage
// amplifies 16-bit rounding), so each result is held instead to the CPU's
// distance from float32: CUDA's bfloat16 step may be no further from the
// float32 step than the CPU's bfloat16 step is (x 1.5), and CUDA's float16
// step with GradScaler no further than that either.  4 x 3 x 64 x 64 images
// keep it quick even where the CUDA emulator runs it (tools/cuda/emu).
// Tagged gpu; every case skips itself where no GPU is visible.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/CudaFlags.h"
#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing_cuda::CudaTest;
using testing_cuda::kGpu;

// max |actual - expected| / max |expected|, after checking the shapes.
double scaled_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.cpu().to(kFloat64).to_vector<double>();
  const auto b = expected.cpu().to(kFloat64).to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// ||actual - expected|| / ||expected|| (Euclidean norms), after checking the shapes.
double distance(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.cpu().to(kFloat64).to_vector<double>();
  const auto b = expected.cpu().to(kFloat64).to_vector<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

struct Step {
  Tensor logits, loss;
  std::vector<std::pair<std::string, Tensor>> grads;  // by parameter name
  std::vector<std::pair<std::string, Tensor>> buffers;  // running statistics
};

// The cross-entropy loss of `model` (on device `d`) on the batch, under
// autocast to `amp_dtype` when given; its logits into *logits when given.
Tensor forward_loss(const nn::models::ResNet& model, const Device& d, const Tensor& images,
                    const Tensor& labels, std::optional<DType> amp_dtype,
                    Tensor* logits = nullptr) {
  std::optional<amp::AutocastGuard> autocast;
  if (amp_dtype) autocast.emplace(d.type, *amp_dtype);
  const Tensor out = model->forward(images.to(d));
  if (logits != nullptr) *logits = out;
  return cross_entropy(out, labels.to(d));
}

// One forward and backward of `model` (train mode) on device `d`, under
// autocast to `amp_dtype` when given.
Step run_step(nn::models::ResNet model, const Device& d, const Tensor& images,
              const Tensor& labels, std::optional<DType> amp_dtype) {
  model->to(d);
  model->train();
  model->zero_grad();
  Step s;
  s.loss = forward_loss(model, d, images, labels, amp_dtype, &s.logits);
  s.loss.backward();
  for (const auto& [name, p] : model->named_parameters()) s.grads.emplace_back(name, p.grad());
  for (const auto& [name, b] : model->named_buffers()) s.buffers.emplace_back(name, b);
  return s;
}

class CudaResNetStep : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    matmul_tf32_ = cuda::matmul_allow_tf32();
    cudnn_tf32_ = cuda::cudnn_allow_tf32();
    cuda::set_matmul_allow_tf32(false);
    cuda::set_cudnn_allow_tf32(false);
    manual_seed(5);
    model_ = nn::models::resnet18(10);
    images_ = randn({4, 3, 64, 64});
    labels_ = tensor<int64_t>({3, 7, 0, 9});
  }
  void TearDown() override {
    if (IsSkipped()) return;
    cuda::set_matmul_allow_tf32(matmul_tf32_);
    cuda::set_cudnn_allow_tf32(cudnn_tf32_);
  }

  // A copy of the initial model (the step moves and changes its argument).
  nn::models::ResNet fresh() const {
    return std::dynamic_pointer_cast<nn::models::ResNetImpl>(model_->clone());
  }

  // The CUDA step's logits, loss, gradients and running statistics within
  // `tolerance` (scaled_error) of the CPU step's.
  void expect_close(const Step& gpu, const Step& cpu, double tolerance) {
    EXPECT_TRUE(gpu.loss.is_cuda());
    EXPECT_LE(scaled_error(gpu.logits, cpu.logits), tolerance) << "logits";
    EXPECT_LE(scaled_error(gpu.loss, cpu.loss), tolerance) << "loss";
    ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
    for (size_t i = 0; i < gpu.grads.size(); ++i) {
      ASSERT_EQ(gpu.grads[i].first, cpu.grads[i].first);
      ASSERT_TRUE(gpu.grads[i].second.defined()) << gpu.grads[i].first;
      EXPECT_LE(scaled_error(gpu.grads[i].second, cpu.grads[i].second), tolerance)
          << "gradient of " << gpu.grads[i].first;
    }
    ASSERT_EQ(gpu.buffers.size(), cpu.buffers.size());
    for (size_t i = 0; i < gpu.buffers.size(); ++i) {
      if (!gpu.buffers[i].second.is_floating_point()) continue;  // num_batches_tracked
      EXPECT_LE(scaled_error(gpu.buffers[i].second, cpu.buffers[i].second), tolerance)
          << gpu.buffers[i].first;
    }
  }

  bool matmul_tf32_ = false, cudnn_tf32_ = false;
  nn::models::ResNet model_{nullptr};
  Tensor images_, labels_;
};

TEST_F(CudaResNetStep, Float32StepMatchesTheCpu) {
  const Step cpu = run_step(fresh(), kCPU, images_, labels_, std::nullopt);
  const Step gpu = run_step(fresh(), kGpu, images_, labels_, std::nullopt);
  // Under the emulator's direct convolutions the worst is 2.4e-5; cuDNN's
  // Winograd and FFT algorithms round more.
  expect_close(gpu, cpu, 5e-4);
}

// The values a step's results are compared on: logits, loss, gradients.
std::vector<std::pair<std::string, Tensor>> results(const Step& s) {
  std::vector<std::pair<std::string, Tensor>> out = {{"logits", s.logits}, {"loss", s.loss}};
  for (const auto& [name, g] : s.grads) out.emplace_back("gradient of " + name, g);
  return out;
}

// Every result of `gpu` is within 1.5x (plus 1e-3) of the distance from
// `reference` (float32) that `cpu` (the CPU's 16-bit step) has.
void expect_as_close_as_the_cpu(const Step& gpu, const Step& cpu, const Step& reference) {
  const auto g = results(gpu), c = results(cpu), r = results(reference);
  ASSERT_EQ(g.size(), r.size());
  ASSERT_EQ(c.size(), r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    ASSERT_EQ(g[i].first, r[i].first);
    ASSERT_TRUE(g[i].second.defined()) << g[i].first;
    const double cpu_distance = distance(c[i].second, r[i].second);
    EXPECT_LE(distance(g[i].second, r[i].second), 1.5 * cpu_distance + 1e-3)
        << g[i].first << " (the CPU's 16-bit step: " << cpu_distance << ")";
  }
}

// The same op lists on both devices (convolutions and linear in bfloat16,
// batch norm and the loss in float32).
TEST_F(CudaResNetStep, Bfloat16AutocastStepIsAsCloseToFloat32AsTheCpus) {
  const Step reference = run_step(fresh(), kCPU, images_, labels_, std::nullopt);
  const Step cpu = run_step(fresh(), kCPU, images_, labels_, kBFloat16);
  const Step gpu = run_step(fresh(), kGpu, images_, labels_, kBFloat16);
  EXPECT_EQ(gpu.logits.dtype(), cpu.logits.dtype());
  EXPECT_EQ(gpu.loss.dtype(), kFloat32);
  expect_as_close_as_the_cpu(gpu, cpu, reference);
}

// float16 autocast with GradScaler and SGD on CUDA (the CPU takes no float16
// autocast): a step is taken within 8 tries, each skip halving the scale from
// 2^16 (a random ResNet's first scaled gradients may overflow float16), the
// loss is the float32 one within 1e-2, and every parameter's update is as
// close to the float32 CPU step's as the CPU's bfloat16 step's update is.
TEST_F(CudaResNetStep, Float16AutocastStepWithGradScalerTracksFloat32) {
  const double lr = 0.1;
  const auto updates = [&](nn::models::ResNet model, const Device& d,
                           std::optional<DType> amp_dtype, Tensor* loss) {
    const nn::models::ResNet initial = fresh();
    model->to(d);
    model->train();
    optim::SGD sgd(model->parameters(), optim::SGDOptions(lr));
    amp::GradScalerOptions scaling;
    scaling.enabled = d.is_cuda();  // the CPU steps unscaled
    amp::GradScaler scaler(scaling);
    // As in training: a step whose scaled gradients overflow float16 is
    // skipped and the scale halved, until one is taken.
    int skipped = 0;
    for (; skipped < 8; ++skipped) {
      sgd.zero_grad();
      *loss = forward_loss(model, d, images_, labels_, amp_dtype);
      scaler.scale(*loss).backward();
      const bool taken = scaler.step(sgd);
      scaler.update();
      if (taken) break;
    }
    EXPECT_LT(skipped, 8) << "no step was taken";
    if (d.is_cuda()) {
      EXPECT_EQ(scaler.get_scale(), 65536.0 / (1 << skipped));
    }
    std::vector<std::pair<std::string, Tensor>> out;
    const auto before = initial->named_parameters();
    for (const auto& [name, p] : model->named_parameters())
      out.emplace_back(name, p.detach().cpu() - before.at(name));
    return out;
  };
  Tensor loss32, loss16, loss_bf16;
  const auto reference = updates(fresh(), kCPU, std::nullopt, &loss32);
  const auto cpu = updates(fresh(), kCPU, kBFloat16, &loss_bf16);
  const auto gpu = updates(fresh(), kGpu, kFloat16, &loss16);
  EXPECT_LE(distance(loss16, loss32), 1e-2);
  ASSERT_EQ(gpu.size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    if (reference[i].second.abs().max().item<double>() == 0) continue;  // no gradient
    const double cpu_distance = distance(cpu[i].second, reference[i].second);
    EXPECT_LE(distance(gpu[i].second, reference[i].second), 1.5 * cpu_distance + 1e-3)
        << "update of " << reference[i].first << " (the CPU's bfloat16 step: " << cpu_distance
        << ")";
  }
}

}  // namespace
}  // namespace loom
