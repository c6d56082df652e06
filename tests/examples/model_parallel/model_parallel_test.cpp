// The model-parallel ResNet-50 variants of examples/model_parallel compute
// what single-device ResNet-50 computes from the same weights: logits, loss
// and every gradient (max relative error <= 1e-5), for split sizes that
// divide the batch, one that does not, and 1.  Tiny inputs keep it fast.
#include <cmath>
#include <string>

#include "examples/model_parallel/ModelParallelResNet50.h"
#include "examples/model_parallel/PipelineParallelResNet50.h"
#include "examples/model_parallel/StreamPipelineResNet50.h"
#include "tensor/WeightReuse.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using examples::ModelParallelResNet50;
using examples::PipelineParallelResNet50;
using examples::StreamPipelineResNet50;

constexpr int64_t kBatch = 6, kImage = 32, kClasses = 10;
const Device kDev0(kCPU, 0), kDev1(kCPU, 1);

// max |a - b| / max |b|: relative to the tensor's own scale, so entries that
// are zero up to rounding (a gradient through batch norm) do not blow it up.
double relative_error(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.detach().to(kDev0).to(kFloat64), b64 = b.detach().to(kDev0).to(kFloat64);
  const double scale = b64.abs().max().item<double>();
  return (a64 - b64).abs().max().item<double>() / std::max(scale, 1e-30);
}

struct Result {
  Tensor logits, loss;
  nn::StateDict grads;  // parameter name -> gradient
};

// One forward + MSE loss against one-hot labels + backward.
Result run(nn::Module& model, const Tensor& images, const Tensor& labels) {
  model.zero_grad();
  Result r;
  r.logits = model.forward(images);
  r.loss = mse_loss(r.logits, labels.to(r.logits.device()));
  r.loss.backward();
  for (const auto& [name, p] : model.named_parameters()) r.grads.insert(name, p.grad());
  return r;
}

class ModelParallelTest : public ::testing::Test {
 protected:
  // One intra-op thread everywhere, so the reference and the stages' workers
  // (which get a share of the cores) do the same arithmetic in the same
  // order.  With several threads each thread multiplies a smaller tile, and
  // the Eigen GEMM path (CPUs without AVX-512) blocks by tile size, which
  // moves rounding at 1e-7; batch norm over micro-batches of 2 images at 1x1
  // (layer4 of a 32x32 input) amplifies that to O(1) in the logits.
  void SetUp() override {
    threads_ = get_num_threads();
    set_num_threads(1);
    manual_seed(7);
    reference_ = nn::models::resnet50(kClasses);
    images_ = randn({kBatch, 3, kImage, kImage});
    labels_ = zeros({kBatch, kClasses});
    float* l = labels_.data_ptr<float>();
    for (int64_t i = 0; i < kBatch; ++i) l[i * kClasses + (i * 3) % kClasses] = 1;
  }

  // Loads the reference weights into `model`, runs both on the same batch and
  // checks logits, loss, every gradient and (train mode) the BN statistics.
  void expect_same(nn::Module& model, bool train, const std::string& what) {
    model.load_state_dict(reference_->state_dict());
    reference_->train(train);
    model.train(train);
    // In train mode batch norm sees each micro-batch alone, so the reference
    // runs the same micro-batches one by one (what the pipeline promises).
    const int64_t split = micro_batch_ > 0 ? micro_batch_ : kBatch;
    // The pipelines reuse weights (tensor/WeightReuse.h), and the timed
    // kernel choices are made apart under it: the reference runs in the same
    // mode, so both run the kernels chosen for the same shapes.
    const auto* pipeline = dynamic_cast<const examples::PipelineParallelResNet50Impl*>(&model);
    WeightReuseGuard reuse(pipeline != nullptr && pipeline->reuse_weights());
    Result want;
    {
      reference_->zero_grad();
      std::vector<Tensor> parts;
      if (train) {
        for (const Tensor& x : images_.split(split, 0)) parts.push_back(reference_->forward(x));
        want.logits = cat(parts, 0);
      } else {
        want.logits = reference_->forward(images_);
      }
      want.loss = mse_loss(want.logits, labels_);
      want.loss.backward();
      for (const auto& [name, p] : reference_->named_parameters()) want.grads.insert(name, p.grad());
    }
    const Result got = run(model, images_, labels_);
    EXPECT_EQ(got.logits.device(), kDev1) << what;
    EXPECT_LE(relative_error(got.logits, want.logits), 1e-5) << what << " logits";
    EXPECT_LE(relative_error(got.loss, want.loss), 1e-5) << what << " loss";
    double grad_scale = 0;
    for (const auto& [name, g] : want.grads) grad_scale = std::max(grad_scale, g.abs().max().item<double>());
    ASSERT_EQ(got.grads.size(), want.grads.size()) << what;
    ASSERT_EQ(got.grads.size(), 161u) << what;  // ResNet-50's parameter count
    for (const auto& [name, g] : want.grads) {
      const Tensor* mine = got.grads.find(name);
      ASSERT_NE(mine, nullptr) << what << ": no parameter " << name;
      ASSERT_TRUE(mine->defined()) << what << ": " << name << " got no gradient";
      const double want_max = g.abs().max().item<double>();
      if (want_max < 1e-5 * grad_scale) {
        // Zero in exact arithmetic (e.g. rounding noise): must stay negligible.
        EXPECT_LT(mine->abs().max().item<double>(), 1e-5 * grad_scale) << what << " grad " << name;
      } else {
        EXPECT_LE(relative_error(*mine, g), 1e-5) << what << " grad " << name;
      }
    }
    if (train) {
      for (const auto& [name, b] : reference_->named_buffers()) {
        if (!b.is_floating_point()) continue;
        EXPECT_LE(relative_error(model.named_buffers().at(name), b), 1e-5) << what << " buffer " << name;
      }
    }
  }

  void TearDown() override { set_num_threads(threads_); }

  int threads_ = 1;
  nn::models::ResNet reference_{nullptr};
  Tensor images_, labels_;
  int64_t micro_batch_ = 0;  // > 0: the reference in train mode runs micro-batches this size
};

TEST_F(ModelParallelTest, ParametersAreTorchvisionNamesOnTheirStageDevices) {
  ModelParallelResNet50 model(kClasses);
  const auto want = reference_->state_dict().keys();
  EXPECT_EQ(model->state_dict().keys(), want);
  for (const auto& [name, p] : model->named_parameters()) {
    const bool stage2 = name.rfind("layer3", 0) == 0 || name.rfind("layer4", 0) == 0 ||
                        name.rfind("fc", 0) == 0;
    EXPECT_EQ(p.device(), stage2 ? kDev1 : kDev0) << name;
  }
}

TEST_F(ModelParallelTest, ModelParallelMatchesSingleDevice) {
  ModelParallelResNet50 model(kClasses);
  expect_same(*model, /*train=*/false, "model parallel (eval)");
  expect_same(*model, /*train=*/true, "model parallel (train)");
}

TEST_F(ModelParallelTest, PipelineMatchesSingleDeviceForEverySplitSize) {
  PipelineParallelResNet50 model(1, kClasses);
  for (int64_t split : {1, 4, 6}) {
    model->set_split_size(split);
    expect_same(*model, /*train=*/false, "pipeline split " + std::to_string(split) + " (eval)");
  }
  // Training mode: batch norm per micro-batch (4 and 2 images).
  model->set_split_size(4);
  micro_batch_ = 4;
  expect_same(*model, /*train=*/true, "pipeline split 4 (train)");
}

TEST_F(ModelParallelTest, StreamPipelineMatchesSingleDeviceForEverySplitSize) {
  StreamPipelineResNet50 model(1, kClasses);
  for (int64_t split : {1, 4, 6}) {
    model->set_split_size(split);
    expect_same(*model, /*train=*/false, "stream pipeline split " + std::to_string(split) + " (eval)");
  }
  model->set_split_size(4);
  micro_batch_ = 4;
  expect_same(*model, /*train=*/true, "stream pipeline split 4 (train)");
}

TEST_F(ModelParallelTest, BadInputIsAClearError) {
  EXPECT_LOOM_ERROR(PipelineParallelResNet50(0, kClasses), "split_size must be positive", "got 0");
  EXPECT_LOOM_ERROR(StreamPipelineResNet50(-3, kClasses), "split_size must be positive", "got -3");
  EXPECT_LOOM_ERROR(ModelParallelResNet50(0), "num_classes must be positive");
  PipelineParallelResNet50 model(2, kClasses);
  EXPECT_LOOM_ERROR(model->set_split_size(0), "split_size must be positive");
  // Images on the wrong device: the user's most common mistake.
  EXPECT_LOOM_ERROR(model(images_.to(kDev1)), "PipelineParallelResNet50", "expected images on cpu",
                    "cpu:1");
  EXPECT_LOOM_ERROR(model(randn({2, 1, kImage, kImage})), "(N, 3, H, W)");
  StreamPipelineResNet50 stream_model(2, kClasses);
  EXPECT_LOOM_ERROR(stream_model(images_.to(kDev1)), "StreamPipelineResNet50", "cpu:1");
  ModelParallelResNet50 mp(kClasses);
  EXPECT_LOOM_ERROR(mp(images_.to(kDev1)), "ModelParallelResNet50", "cpu:1");
}

TEST_F(ModelParallelTest, AnErrorInsideAStageReachesTheCallerAndThePipelineRecovers) {
  // A classifier of the wrong width fails inside stage 2, on device1's stream
  // worker; the error comes back to forward's caller, and once the model is
  // repaired the next batch runs normally.
  NoGradGuard no_grad;
  StreamPipelineResNet50 model(2, kClasses);
  PipelineParallelResNet50 plain(2, kClasses);
  for (nn::Module* m : {static_cast<nn::Module*>(model.get()), static_cast<nn::Module*>(plain.get())}) {
    auto* mp = dynamic_cast<examples::ModelParallelResNet50Impl*>(m);
    const nn::Linear good = mp->fc;
    mp->eval();
    mp->fc = nn::Linear(7, kClasses);
    mp->fc->to(kDev1);
    EXPECT_LOOM_ERROR(mp->forward(images_), "7");
    mp->fc = good;
    EXPECT_EQ(mp->forward(images_).sizes(), (IntList{kBatch, kClasses}));
  }
}

}  // namespace
}  // namespace loom
