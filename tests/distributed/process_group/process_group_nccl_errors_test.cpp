// The nccl backend where it cannot run: a build without CUDA, or a machine
// without a visible GPU.  Runs in CI (no GPU); on a GPU machine the cases
// that need its absence skip.  No fork here, so asking the driver is safe.
#include <chrono>

#include "distributed/DefaultGroup.h"
#include "distributed/ProcessGroupNccl.h"
#include "distributed/store/HashStore.h"
#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;

TEST(ProcessGroupNcclUnavailable, InitProcessGroupSaysWhyBeforeAnyRendezvous) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible: nccl can run here";
  InitOptions options;
  options.store = std::make_shared<HashStore>();
  options.rank = 0;
  options.world_size = 2;  // a rendezvous would wait for rank 1: the check comes first
  options.timeout = milliseconds(500);
  if (!cuda::built_with_cuda()) {
    EXPECT_LOOM_ERROR(init_process_group("nccl", options),
                      "init_process_group: backend 'nccl' needs CUDA, and this build of loom has "
                      "none", "use backend 'gloo'");
  } else {
    EXPECT_LOOM_ERROR(init_process_group("NCCL", options),
                      "init_process_group: backend 'nccl' needs a GPU per rank",
                      "sees no CUDA device", "use backend 'gloo'");
  }
  EXPECT_FALSE(is_initialized());
  // gloo still works afterwards.
  options.world_size = 1;
  auto pg = init_process_group("gloo", options);
  EXPECT_EQ(get_backend(), "gloo");
  destroy_process_group();
}

TEST(ProcessGroupNcclUnavailable, ConstructorSaysWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible: nccl can run here";
  auto store = std::make_shared<HashStore>();
  if (!cuda::built_with_cuda()) {
    EXPECT_LOOM_ERROR(ProcessGroupNccl(store, 0, 1),
                      "ProcessGroupNccl: the nccl backend needs CUDA, and this build of loom has "
                      "none", "gloo");
  } else {
    EXPECT_LOOM_ERROR(ProcessGroupNccl(store, 0, 1), "ProcessGroupNccl: rank 0 sees no CUDA device",
                      "gloo");
  }
}

TEST(ProcessGroupNcclUnavailable, ArgumentsAreCheckedFirst) {
  auto store = std::make_shared<HashStore>();
  EXPECT_LOOM_ERROR(ProcessGroupNccl(nullptr, 0, 1), "ProcessGroupNccl");
  if (cuda::built_with_cuda()) {
    EXPECT_LOOM_ERROR(ProcessGroupNccl(store, 2, 2), "ProcessGroupNccl: rank must be in [0, 2), got 2");
    EXPECT_LOOM_ERROR(ProcessGroupNccl(store, 0, 0), "ProcessGroupNccl: size must be >= 1, got 0");
  }
}

TEST(ProcessGroupNcclUnavailable, UnknownBackendListsBoth) {
  InitOptions options;
  options.store = std::make_shared<HashStore>();
  options.rank = 0;
  options.world_size = 1;
  EXPECT_LOOM_ERROR(init_process_group("mpi", options), "unknown backend 'mpi'",
                    "expected 'gloo' or 'nccl'");
}

}  // namespace
}  // namespace distributed
}  // namespace loom
