// Host<->GPU and GPU<->GPU copies (tensor/cuda/Copy.cpp), fills on the
// GPU, and the error every other op gives for CUDA tensors.  Tagged gpu;
// every case skips itself where no GPU is visible.  The CPU tensors are the
// oracle: a round trip must give back exactly the same values.
#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

class CudaCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  }
  const Device gpu{kCUDA, 0};
};

// Values of `dtype`, distinct per element, shape (2, 3, 4).
Tensor sample(DType dtype) {
  Tensor t = arange(24, kFloat64).view({2, 3, 4});
  if (dtype == kBool) return (t - 11.5).gt(0);
  if (dtype == kUInt8 || dtype == kInt32 || dtype == kInt64) return (t * 7 - 50).abs().to(dtype);
  return (t * 0.37 - 3.1).to(dtype);
}

const DType kAllDTypes[] = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool};

// Exact equality, element by element, in any dtype.
::testing::AssertionResult SameValues(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  return AllClose(a.to(kFloat64), b.to(kFloat64), 0, 0);
}

TEST_F(CudaCopy, RoundTripOfEveryDType) {
  for (DType dtype : kAllDTypes) {
    Tensor host = sample(dtype);
    Tensor dev = host.to(gpu);
    EXPECT_TRUE(dev.is_cuda());
    EXPECT_EQ(dev.device(), gpu);
    EXPECT_EQ(dev.dtype(), dtype);
    Tensor back = dev.cpu();
    EXPECT_TRUE(SameValues(back, host)) << dtype_name(dtype);
  }
}

TEST_F(CudaCopy, NonContiguousSourcesOnBothSides) {
  for (DType dtype : kAllDTypes) {
    Tensor host = sample(dtype);
    // Host-side views: transposed, sliced with a step, broadcast.
    for (const Tensor& view : {host.transpose(0, 2), host.select(1, 2), host.narrow(2, 1, 2),
                               host.select(2, 0).unsqueeze(2).expand({2, 3, 5})}) {
      EXPECT_TRUE(SameValues(view.to(gpu).cpu(), view.contiguous())) << dtype_name(dtype);
      // Device-side views: the strided kernel gathers them on the GPU.
      Tensor dev = host.to(gpu);
      Tensor dev_view = dev.transpose(0, 2);
      EXPECT_TRUE(SameValues(dev_view.cpu(), host.transpose(0, 2).contiguous()))
          << dtype_name(dtype);
    }
  }
}

TEST_F(CudaCopy, CopyIntoNonContiguousDestinations) {
  Tensor host = sample(kFloat32);
  Tensor dev = zeros({4, 3, 2}, TensorOptions(kFloat32).device(gpu));
  dev.transpose(0, 2).copy_(host);  // GPU destination is a strided view
  EXPECT_TRUE(SameValues(dev.cpu(), host.transpose(0, 2).contiguous()));
  Tensor out = zeros({4, 3, 2});
  out.transpose(0, 2).copy_(host.to(gpu));  // CPU destination is a strided view
  EXPECT_TRUE(SameValues(out, host.transpose(0, 2).contiguous()));
  // Broadcast source into a GPU tensor.
  Tensor row = tensor<float>({1, 2, 3, 4});
  Tensor grid = empty({3, 4}, TensorOptions(kFloat32).device(gpu));
  grid.copy_(row);
  EXPECT_TRUE(SameValues(grid.cpu(), row.expand({3, 4}).contiguous()));
}

TEST_F(CudaCopy, ConversionsAcrossDevices) {
  Tensor host = sample(kFloat64);
  Tensor dev_f32 = host.to(gpu, kFloat32);
  EXPECT_EQ(dev_f32.dtype(), kFloat32);
  EXPECT_TRUE(SameValues(dev_f32.cpu(), host.to(kFloat32)));
  Tensor dev_i64 = dev_f32.to(kInt64);  // GPU -> GPU, new dtype
  EXPECT_TRUE(dev_i64.is_cuda());
  EXPECT_TRUE(SameValues(dev_i64.cpu(), host.to(kFloat32).to(kInt64)));
  Tensor back = empty({2, 3, 4}, kFloat64);
  back.copy_(dev_f32);  // GPU float32 -> CPU float64
  EXPECT_TRUE(SameValues(back, host.to(kFloat32).to(kFloat64)));
}

TEST_F(CudaCopy, WithinAndAcrossGpus) {
  Tensor host = sample(kInt32);
  Tensor a = host.to(gpu);
  Tensor b = a.clone();
  EXPECT_TRUE(b.is_cuda());
  EXPECT_NE(a.data_ptr(), b.data_ptr());
  EXPECT_TRUE(SameValues(b.cpu(), host));
  if (cuda::device_count() < 2) return;
  Tensor c = a.to(Device(kCUDA, 1));
  EXPECT_EQ(c.device(), Device(kCUDA, 1));
  EXPECT_TRUE(SameValues(c.cpu(), host));
  EXPECT_TRUE(SameValues(c.to(gpu).cpu(), host));
}

TEST_F(CudaCopy, NonBlockingFromPinnedMemory) {
  Tensor pinned = cuda::pinned_empty({1 << 20}, kFloat32);
  pinned.copy_(arange(1 << 20, kFloat32));
  ASSERT_TRUE(pinned.is_pinned());
  Tensor dev = pinned.to(gpu, /*non_blocking=*/true);
  cuda::synchronize(0);
  Tensor back = cuda::pinned_empty({1 << 20}, kFloat32);
  back.copy_(dev);
  EXPECT_TRUE(SameValues(back, arange(1 << 20, kFloat32)));
  // Freeing the pinned source right after an async copy must not let the
  // allocator hand its block out again before the copy has run.
  // (If the block came back at once, overwriting it would race the copy.)
  Tensor src = cuda::pinned_empty({1 << 20}, kFloat32);
  src.fill_(3);
  Tensor dev2 = src.to(gpu, true);
  src = Tensor();
  Tensor next = cuda::pinned_empty({1 << 20}, kFloat32);
  next.fill_(5);
  EXPECT_EQ(dev2.cpu().sum().item(), 3.0 * (1 << 20));
}

TEST_F(CudaCopy, FillsAndFactoriesOnTheGpu) {
  for (DType dtype : kAllDTypes) {
    Tensor z = zeros({3, 4}, TensorOptions(dtype).device(gpu));
    EXPECT_TRUE(SameValues(z.cpu(), zeros({3, 4}, dtype))) << dtype_name(dtype);
    Tensor f = full({5}, 1, TensorOptions(dtype).device(gpu));
    EXPECT_TRUE(SameValues(f.cpu(), full({5}, 1, dtype))) << dtype_name(dtype);
  }
  Tensor t = zeros({4, 4}, Device("cuda:0"));
  t.narrow(1, 1, 2).fill_(2.5);  // strided fill
  Tensor expected = zeros({4, 4});
  expected.narrow(1, 1, 2).fill_(2.5);
  EXPECT_TRUE(SameValues(t.cpu(), expected));
  Generator gen(3);
  Tensor r = randn({10}, TensorOptions(kFloat32).device(gpu), &gen);
  Generator gen2(3);
  EXPECT_TRUE(SameValues(r.cpu(), randn({10}, kFloat32, &gen2)));
}

TEST_F(CudaCopy, PrintingAndItemGoThroughTheHost) {
  Tensor t = tensor<float>({1.5f, 2.5f}).to(gpu);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(t.select(0, 1).item(), 2.5);
  EXPECT_NE(t.describe().find("cuda:0"), std::string::npos);
}

TEST_F(CudaCopy, OpsOnTwoDevicesAreAClearError) {
  // (Every op runs on CUDA now: cuda_elementwise_test, cuda_reduce_test,
  // cuda_gemm_test, cuda_conv_test, cuda_norm_pool_test,
  // cuda_softmax_loss_test, cuda_index_test, cuda_dropout_test.)
  Tensor a = ones({2, 3}, Device("cuda:0"));
  EXPECT_LOOM_ERROR(a + ones({2, 3}), "same device", "cuda:0", "cpu");
}

TEST_F(CudaCopy, BadDeviceIndexNamesTheCount) {
  const int n = cuda::device_count();
  EXPECT_LOOM_ERROR(ones({2}).to(Device(kCUDA, n)), "invalid CUDA device index",
                    std::to_string(n) + " CUDA device");
}

}  // namespace
}  // namespace loom
