// nn::DataParallel on CUDA devices: outputs, loss and every parameter
// gradient equal the module's on the whole batch on one GPU (max relative
// error <= 1e-5, float32, TF32 off), on 2 and 3 replicas, for uneven batches
// and batches smaller than the replica count.  With one GPU the replicas
// share it (cuda:0 listed several times: they run one after another on its
// stream, which still exercises the copies, the autograd links and the
// gather); with two or more they run on distinct GPUs.  Tagged gpu; every
// case skips itself where no GPU is visible.
#include <cmath>

#include "tensor/CudaFlags.h"
#include "tensor/CudaRuntime.h"
#include "tests/CudaTestUtil.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing_cuda::CudaTest;

double max_rel_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.cpu().to_vector<double>();
  const auto b = expected.cpu().to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// `n` replica devices: distinct GPUs while there are enough, then cuda:0 again.
std::vector<Device> gpus(size_t n) {
  const int count = cuda::device_count();
  std::vector<Device> out;
  for (size_t k = 0; k < n; ++k)
    out.emplace_back(kCUDA, static_cast<int>(k) < count ? static_cast<int>(k) : 0);
  return out;
}

nn::Sequential mlp() {
  return nn::Sequential(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 3));
}

class CudaDataParallel : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    tf32_ = cuda::matmul_allow_tf32();
    cuda::set_matmul_allow_tf32(false);
  }
  void TearDown() override {
    if (!IsSkipped()) cuda::set_matmul_allow_tf32(tf32_);
  }

  void expect_same_as_whole_batch(size_t replicas, int64_t batch) {
    SCOPED_TRACE(::testing::Message() << replicas << " replicas, batch " << batch);
    const Device gpu0(kCUDA, 0);
    manual_seed(3);
    nn::Sequential model = mlp();
    model->to(gpu0);
    auto reference = std::dynamic_pointer_cast<nn::SequentialImpl>(model->clone());
    nn::DataParallel dp(model, gpus(replicas));
    Tensor x = randn({batch, 6}).to(gpu0);
    Tensor target = randn({batch, 3}).to(gpu0);

    Tensor want = reference->forward(x);
    Tensor want_loss = ((want - target) * (want - target)).mean();
    want_loss.backward();
    Tensor out = dp(x);
    EXPECT_EQ(out.device(), gpu0);
    Tensor loss = ((out - target) * (out - target)).mean();
    loss.backward();

    EXPECT_LE(max_rel_error(out, want), 1e-5);
    EXPECT_LE(max_rel_error(loss, want_loss), 1e-5);
    const auto want_params = reference->named_parameters();
    for (const auto& [name, p] : model->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_EQ(p.grad().device(), gpu0) << name;
      EXPECT_LE(max_rel_error(p.grad(), want_params.at(name).grad()), 1e-5) << name;
    }

    // A step later the replicas hold the new parameters.
    {
      NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.sub_(p.grad() * 0.1);
      for (auto& p : reference->parameters()) p.sub_(p.grad() * 0.1);
      EXPECT_LE(max_rel_error(dp(x), reference->forward(x)), 1e-5);
    }
  }

  bool tf32_ = false;
};

TEST_F(CudaDataParallel, TwoReplicasEqualTheWholeBatch) {
  expect_same_as_whole_batch(2, 8);
  expect_same_as_whole_batch(2, 7);
}

TEST_F(CudaDataParallel, ThreeReplicasUnevenAndSmallBatches) {
  expect_same_as_whole_batch(3, 7);
  expect_same_as_whole_batch(3, 2);
}

TEST_F(CudaDataParallel, OutputOnTheCpu) {
  const Device gpu0(kCUDA, 0);
  manual_seed(4);
  nn::Sequential model = mlp();
  model->to(gpu0);
  auto reference = std::dynamic_pointer_cast<nn::SequentialImpl>(model->clone());
  nn::DataParallel dp(model, gpus(2), Device(kCPU));
  Tensor x = randn({5, 6});  // scattered from the host
  Tensor out = dp(x);
  EXPECT_TRUE(out.is_cpu());
  EXPECT_LE(max_rel_error(out, reference->forward(x.to(gpu0))), 1e-5);
}

TEST_F(CudaDataParallel, ModuleLeftOnTheCpuIsNamed) {
  nn::Sequential model = mlp();
  nn::DataParallel dp(model, gpus(2));
  EXPECT_LOOM_ERROR(dp(randn({4, 6})), "parameter \"0.weight\" is on cpu",
                    "device_ids[0] (cuda:0)");
}

}  // namespace
}  // namespace loom
