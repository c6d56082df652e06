// amp::GradScaler against PyTorch's GradScaler (tools/pyloom/
// grad_scaler_reference.py) on a scripted run with injected inf and NaN
// gradients: the same scale and growth tracker after every update, the same
// skipped steps and the same weights (to a float32 ulp); and the scaler's rules (one unscale_
// per step, update after step, disabled scaler, state_dict round trip).
#include <cmath>
#include <sstream>

#include "tests/GradScalerScript.h"
#include "tests/PythonRef.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

struct Row {
  int step;
  double scale;
  int64_t tracker;
  bool skipped;
  std::vector<double> w;
};

std::vector<Row> pytorch_rows() {
  std::string output;
  EXPECT_EQ(testing::run_python("grad_scaler_reference.py", "", output), 0) << output;
  std::vector<Row> rows;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    Row r;
    int skipped;
    in >> r.step >> r.scale >> r.tracker >> skipped;
    r.skipped = skipped != 0;
    r.w.resize(3);
    for (double& v : r.w) in >> v;
    if (in) rows.push_back(r);
  }
  return rows;
}

TEST(GradScaler, TrajectoryMatchesPyTorchWithInjectedInfAndNaN) {
  const std::vector<Row> want = pytorch_rows();
  ASSERT_EQ(want.size(), 20u);
  const std::vector<testing::ScalerStep> got = testing::run_scaler_script(Device(kCPU));
  for (int step = 0; step < 20; ++step) {
    const Row& r = want[step];
    EXPECT_EQ(got[step].scale, r.scale) << "step " << step;
    EXPECT_EQ(got[step].tracker, r.tracker) << "step " << step;
    EXPECT_EQ(!got[step].ran, r.skipped) << "step " << step;
    // Within a float32 ulp: PyTorch's vectorised add_(grad, alpha=-lr) may
    // fuse the multiply-add where loom's SGD rounds twice.
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(got[step].w[i], r.w[i], 2e-7 * std::max(1.0, std::abs(r.w[i]))) << "step " << step;
  }
}

TEST(GradScaler, DefaultsArePyTorchs) {
  amp::GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
  const Tensor loss = scalar_tensor(1.5);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.sizes(), IntList({1}));  // the scale is a [1] tensor, as PyTorch's
  EXPECT_EQ(scaled.item<double>(), 1.5 * 65536.0);
}

TEST(GradScaler, OrderOfCallsIsChecked) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  EXPECT_LOOM_ERROR(scaler.step(opt), "scale(loss) first");
  scaler.scale(w.sum()).backward();
  scaler.unscale_(opt);
  EXPECT_LOOM_ERROR(scaler.unscale_(opt), "already called", "update()");
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_LOOM_ERROR(scaler.step(opt), "already called");
  EXPECT_LOOM_ERROR(scaler.unscale_(opt), "after step()");
  scaler.update();
  EXPECT_LOOM_ERROR(scaler.update(), "no inf checks");
  EXPECT_LOOM_ERROR(scaler.scale(arange(0, 3)), "floating-point");
  // Gradients were divided by the scale before the step: w moved by lr * 1.
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>({0.9f, 0.9f}));
}

// The inf/NaN check reads the gradients before they are unscaled, as
// PyTorch's: with a scale below 1, a finite gradient that overflows when
// multiplied by 1 / scale does not skip the step.
TEST(GradScaler, OverflowWhileUnscalingDoesNotSkipTheStep) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  amp::GradScalerOptions options;
  options.init_scale = 0.25;
  amp::GradScaler scaler(options);
  scaler.scale(w.sum()).backward();
  w.grad().copy_(tensor<float>({3e38f, 1.0f}));  // a large finite scaled gradient
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_TRUE(std::isinf(w.grad().to_vector<float>()[0]));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 0.25);  // a good step: no backoff
}

TEST(GradScaler, Float16GradientsAreRefused) {
  Tensor w = ones({2}, TensorOptions(kFloat16)).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  scaler.scale(w.sum()).backward();
  EXPECT_LOOM_ERROR(scaler.unscale_(opt), "float16 gradients", "master");
}

TEST(GradScaler, DisabledScalerOnlySteps) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.5));
  amp::GradScalerOptions options;
  options.enabled = false;
  amp::GradScaler scaler(options);
  const Tensor loss = w.sum();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  scaler.scale(loss).backward();
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>({0.5f, 0.5f}));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_EQ(scaler.state_dict().size(), 0u);
}

TEST(GradScaler, StateDictRoundTrip) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  amp::GradScalerOptions options;
  options.growth_interval = 5;
  amp::GradScaler a(options);
  a.scale(w.sum()).backward();
  a.step(opt);
  a.update(123.0);
  const auto state = a.state_dict();
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval",
                          "_growth_tracker"})
    EXPECT_TRUE(state.contains(key)) << key;
  EXPECT_EQ(state.at("scale").item<double>(), 123.0);
  amp::GradScaler b;
  b.load_state_dict(state);
  EXPECT_EQ(b.get_scale(), 123.0);
  EXPECT_EQ(b.options().growth_interval, 5);
  EXPECT_LOOM_ERROR(b.load_state_dict({}), "empty");
}

}  // namespace
}  // namespace loom
