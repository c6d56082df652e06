// The emulator's guard pages (LOOM_CUDA_EMU_GUARD=1, set by this test's
// BUILD env): a kernel that touches memory past its block faults at once,
// and the report names the launch's file:line, the block and the thread;
// accesses within the block, up to its 512-byte rounding, are fine.
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include "loom_emu/Device.h"

namespace {

void store_at(float* p, int index) { p[index] = 1.0f; }

TEST(EmulatorGuardPages, AWritePastABlockIsReportedWithItsLaunch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* p = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&p), 1000 * sizeof(float));  // 4,000 bytes: 4,096
        loom_emu::launch(loom_emu::Config(dim3(1), dim3(1)).at("oob.cu", 7), store_at, p, 1024);
        cudaDeviceSynchronize();
      },
      "invalid memory access at 0x[0-9a-f]+ in the kernel launched at oob.cu:7, block \\(0, 0, "
      "0\\), thread \\(0, 0, 0\\)");
}

TEST(EmulatorGuardPages, AWriteBeforeABlockFaultsToo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* p = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&p), 1024 * sizeof(float));  // a whole page
        loom_emu::launch(loom_emu::Config(dim3(1), dim3(1)).at("oob.cu", 9), store_at, p, -1);
        cudaDeviceSynchronize();
      },
      "invalid memory access .* oob.cu:9");
}

TEST(EmulatorGuardPages, AccessesWithinTheRoundedBlockAreFine) {
  float* p = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), 1000 * sizeof(float)), cudaSuccess);
  for (int i : {0, 999, 1023})  // 1023: the 512-byte rounding's last float
    loom_emu::launch(loom_emu::Config(dim3(1), dim3(1)), store_at, p, i);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(p[999], 1.0f);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

}  // namespace
