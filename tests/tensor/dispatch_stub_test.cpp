// DispatchStub::answer_or, the call behind the capability slots ("does this
// device's kernel take bfloat16?"): the kernel's answer where the device
// type's slot is filled, the given default where it is not (no error, even
// for a CUDA device in a build or on a machine without one), and never
// timed by the kernel profile.
#include "tensor/native/DispatchStub.h"
#include "tensor/native/KernelProfile.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using TakesKernel = bool (*)(DType dtype);
native::DispatchStub<TakesKernel> takes_stub("takes_for_test");

bool takes_bfloat16(DType dtype) { return dtype == kBFloat16; }
const native::RegisterKernel reg_takes(takes_stub, kCPU, &takes_bfloat16);

TEST(DispatchStub, AnswerOrAsksTheFilledSlotOnly) {
  EXPECT_TRUE(takes_stub.answer_or(false, Device(kCPU), kBFloat16));
  EXPECT_FALSE(takes_stub.answer_or(true, Device(kCPU), kFloat16));
  EXPECT_FALSE(takes_stub.answer_or(false, Device(kCUDA, 0), kBFloat16));
  EXPECT_TRUE(takes_stub.answer_or(true, Device(kCUDA, 3), kBFloat16));
  // The slot itself still says what is missing.
  EXPECT_LOOM_ERROR(takes_stub(Device(kCUDA, 0), kBFloat16), "takes_for_test");
}

TEST(DispatchStub, AnswersAreNotProfiled) {
  native::start_kernel_profile();
  (void)takes_stub.answer_or(false, Device(kCPU), kBFloat16);
  EXPECT_TRUE(native::stop_kernel_profile().empty());
}

}  // namespace
}  // namespace loom
