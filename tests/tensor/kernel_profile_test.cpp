// The kernel profile (tensor/native/KernelProfile.h): every call through a
// dispatch slot is counted under the slot's name and the phase set at the
// time, with self times (a kernel's nested slot calls are charged to their
// own names), from any thread; nothing is recorded while it is off.
#include <chrono>
#include <thread>

#include "tensor/native/Binary.h"
#include "tensor/native/DispatchStub.h"
#include "tensor/native/KernelProfile.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using native::KernelStat;

// A slot whose CPU kernel sleeps 30 ms around one nested add.
using OuterKernel = void (*)(const Tensor& a);
native::DispatchStub<OuterKernel> outer_stub("outer_for_test");

void outer_kernel(const Tensor& a) {
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  (void)native::binary(native::binary_op<optable::Add>(), a, a);
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
}
const native::RegisterKernel reg_outer(outer_stub, kCPU, &outer_kernel);

const KernelStat* find(const std::vector<KernelStat>& stats, const std::string& phase,
                       const std::string& name) {
  for (const KernelStat& s : stats)
    if (s.phase == phase && s.name == name) return &s;
  return nullptr;
}

TEST(KernelProfile, CountsCallsPerPhaseWithSelfTimes) {
  const Tensor a = ones({1000});
  native::start_kernel_profile();
  native::set_kernel_profile_phase("forward");
  for (int i = 0; i < 3; ++i) (void)(a + a);
  native::set_kernel_profile_phase("backward");
  outer_stub(Device(), a);
  const std::vector<KernelStat> stats = native::stop_kernel_profile();

  const KernelStat* add_forward = find(stats, "forward", "binary");
  ASSERT_NE(add_forward, nullptr);
  EXPECT_EQ(add_forward->calls, 3);
  const KernelStat* outer = find(stats, "backward", "outer_for_test");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->calls, 1);
  EXPECT_GE(outer->seconds, 0.029);
  const KernelStat* nested = find(stats, "backward", "binary");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->calls, 1);
  EXPECT_LT(nested->seconds, 0.015);  // not the sleeps around it
  for (size_t i = 1; i < stats.size(); ++i) EXPECT_GE(stats[i - 1].seconds, stats[i].seconds);
}

TEST(KernelProfile, RecordsOtherThreadsAndNothingWhenOff) {
  const Tensor a = ones({100});
  (void)(a + a);  // off: not recorded
  native::start_kernel_profile();
  std::thread worker([&] { (void)(a * a); });
  worker.join();
  const std::vector<KernelStat> stats = native::stop_kernel_profile();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].name, "binary");
  EXPECT_EQ(stats[0].calls, 1);
  (void)(a + a);
  native::start_kernel_profile();
  EXPECT_TRUE(native::stop_kernel_profile().empty());
}

}  // namespace
}  // namespace loom
