// pipeline::Pipe on CUDA devices: one GPU hosting both stages (cuda:0,cuda:0,
// the model-parallel tutorial's single-GPU setup), a CPU stage handing over
// to a GPU stage, and two GPUs where present.  Elementwise layers only (the
// GPU ops that exist so far); the CPU run of the same layers is the oracle.
// Tagged gpu; every case skips itself where no GPU is visible.
#include <cmath>

#include "pipeline/Pipe.h"
#include "tensor/CudaRuntime.h"
#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using pipeline::Pipe;
using pipeline::PipeOptions;
using pipeline::Schedule;
using testing_cuda::CudaTest;

// y = tanh(x * scale + shift): one parameter per feature, elementwise only.
struct AffineTanhImpl : nn::Cloneable<AffineTanhImpl> {
  AffineTanhImpl(int64_t features, double init) : Cloneable("AffineTanh"), n(features), a(init) {
    reset();
  }
  void reset() override {
    scale = register_parameter("scale", full({n}, a));
    shift = register_parameter("shift", full({n}, -0.25 * a));
  }
  Tensor forward(const Tensor& x) override { return tanh(x * scale + shift); }
  int64_t n;
  double a;
  Tensor scale, shift;
};
LOOM_MODULE(AffineTanh);

constexpr int64_t kFeatures = 8;

nn::Sequential net() {
  return nn::Sequential(AffineTanh(kFeatures, 1.5), AffineTanh(kFeatures, 0.5),
                        AffineTanh(kFeatures, 2.0), AffineTanh(kFeatures, -1.0));
}

Tensor mse(const Tensor& out, const Tensor& target) {
  const Tensor d = out - target;
  return (d * d).mean();
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.cpu().to_vector<double>();
  const auto y = b.cpu().to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// Runs train_step over `devices` and on the CPU; outputs, loss and every
// parameter's gradient must agree.
void expect_same_as_cpu(const std::vector<Device>& devices, Schedule schedule) {
  Generator gen(3);
  const Tensor x = randn({10, kFeatures}, {}, &gen);
  const Tensor target = randn({10, kFeatures}, {}, &gen);

  nn::Sequential reference = net();
  const Tensor expected_out = reference->forward(x);
  const Tensor expected_loss = mse(reference->forward(x), target);
  expected_loss.backward();

  nn::Sequential layers = net();
  Pipe pipe(layers, PipeOptions(devices).chunks(3).schedule(schedule));
  EXPECT_LT(max_abs_diff(pipe->forward(x), expected_out), 1e-5);
  const Tensor loss = pipe->train_step(x, target, mse);
  EXPECT_EQ(loss.device(), devices.back());
  EXPECT_LT(max_abs_diff(loss, expected_loss), 1e-5);
  const auto got = layers->parameters();
  const auto want = reference->parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].grad().defined()) << "parameter " << i;
    EXPECT_LT(max_abs_diff(got[i].grad(), want[i].grad()), 1e-5) << "parameter " << i;
  }
}

class CudaPipe : public CudaTest {};

TEST_F(CudaPipe, OneGpuHostingTwoStagesMatchesTheCpu) {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB})
    expect_same_as_cpu({Device("cuda:0"), Device("cuda:0")}, schedule);
}

TEST_F(CudaPipe, CpuStageHandsOverToAGpuStage) {
  expect_same_as_cpu({Device("cpu"), Device("cuda:0")}, Schedule::kGPipe);
  expect_same_as_cpu({Device("cuda:0"), Device("cpu:1")}, Schedule::kOneFOneB);
}

TEST_F(CudaPipe, TwoGpus) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  for (Schedule schedule : {Schedule::kGPipe, Schedule::kOneFOneB})
    expect_same_as_cpu({Device("cuda:0"), Device("cuda:1")}, schedule);
}

TEST_F(CudaPipe, BadGpuIndexIsAnError) {
  EXPECT_LOOM_ERROR(Pipe(net(), PipeOptions({Device(kCUDA, cuda::device_count())})), "Pipe",
                    "invalid CUDA device index");
}

}  // namespace
}  // namespace loom
