// Which kernel slots each backend fills.  In a build with CUDA every slot
// the CPU fills must have a CUDA kernel too, the capability slots included
// (since CUDA runs channels last, none is CPU-only).  The op-table redesign (b43f8c8) once lost CUDA's
// `cat` this way: nothing but a GPU run would have noticed.  Runs without a
// GPU: registration happens at start-up either way.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tensor/CudaRuntime.h"
#include "tensor/native/Copy.h"
#include "tensor/native/DispatchStub.h"
#include "tensor/native/Pooling.h"

namespace loom {
namespace {

// The slots `type` fills, by slot (two slots may share an op name:
// mse_loss's mean and sum kernels), with their names.
std::map<const void*, std::string> filled(DeviceType type) {
  std::map<const void*, std::string> out;
  for (const native::KernelRegistration& r : native::kernel_registrations())
    if (r.type == type) out[r.slot] = r.op;
  return out;
}

TEST(DispatchCoverage, EveryCpuKernelHasACudaKernel) {
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  // Every slot, the capability slots (answer_or: layouts, fusions, 16-bit
  // kernels) too: CUDA answers each itself, channels-last convolutions,
  // batch norm and max pooling included.
  const auto cpu = filled(kCPU), cuda = filled(kCUDA);
  ASSERT_GT(cpu.size(), 40u) << "the registry missed the CPU kernels";
  for (const auto& [slot, op] : cpu) EXPECT_EQ(cuda.count(slot), 1u) << op << " has no CUDA kernel";
  for (const auto& [slot, op] : cuda)
    EXPECT_EQ(cpu.count(slot), 1u) << op << " has a CUDA kernel but no CPU one";
}

// CUDA's elementwise kernels take both 16-bit floats as they are; the CPU's
// take bfloat16 (float16 goes through float32 copies there).  A capability
// answer: no GPU is touched.
TEST(DispatchCoverage, SixteenBitElementwiseKernels) {
  EXPECT_TRUE(native::elementwise_takes(Device(kCPU), kBFloat16));
  EXPECT_FALSE(native::elementwise_takes(Device(kCPU), kFloat16));
  EXPECT_FALSE(native::elementwise_takes(Device(kCPU), kFloat32));
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  EXPECT_TRUE(native::elementwise_takes(Device(kCUDA, 0), kFloat16));
  EXPECT_TRUE(native::elementwise_takes(Device(kCUDA, 0), kBFloat16));
  EXPECT_FALSE(native::elementwise_takes(Device(kCUDA, 0), kFloat32));
}

// CUDA's max pooling takes every floating dtype as it is, in both layouts;
// the CPU's takes bfloat16 (float16 through float32 copies) and channels
// last for float32, float64 and bfloat16.
TEST(DispatchCoverage, MaxPoolKernels) {
  EXPECT_TRUE(native::max_pool2d_takes_stub.answer_or(false, Device(kCPU), kBFloat16));
  EXPECT_FALSE(native::max_pool2d_takes_stub.answer_or(false, Device(kCPU), kFloat16));
  EXPECT_FALSE(native::max_pool2d_channels_last_stub.answer_or(false, Device(kCPU), kFloat16));
  if (!cuda::built_with_cuda()) GTEST_SKIP() << "built without CUDA";
  for (DType d : {kFloat16, kBFloat16})
    EXPECT_TRUE(native::max_pool2d_takes_stub.answer_or(false, Device(kCUDA, 0), d))
        << dtype_name(d);
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
    EXPECT_TRUE(native::max_pool2d_channels_last_stub.answer_or(false, Device(kCUDA, 0), d))
        << dtype_name(d);
}

TEST(DispatchCoverage, RegistrationsNameTheirSlots) {
  for (const native::KernelRegistration& r : native::kernel_registrations())
    EXPECT_FALSE(r.op.empty());
}

}  // namespace
}  // namespace loom
