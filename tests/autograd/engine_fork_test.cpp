// A process forked after the engine started device worker threads (spawn'd
// ranks of a model-parallel job) still runs backward across devices.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "loom.h"

namespace loom {
namespace {

// d/dx sum((x on cpu:1) * 3) = 3, computed by a node on cpu:1's worker.
bool cross_device_backward_works() {
  Tensor x = ones({4}).requires_grad_();
  Tensor y = x.to(Device("cpu:1")).mul(3.0).sum();
  y.backward();
  for (float g : x.grad().to_vector<float>()) {
    if (g != 3.0f) return false;
  }
  return true;
}

TEST(EngineFork, ChildRunsCrossDeviceBackward) {
  ASSERT_TRUE(cross_device_backward_works());  // starts cpu:1's worker here
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang becomes SIGALRM, not a stuck test
    _exit(cross_device_backward_works() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(EngineFork, ModuleMovedWhileAnOldGraphIsAliveBackpropagatesToTheNewDevice) {
  nn::Linear fc(3, 2);
  Tensor old_out = fc(ones({1, 3}));  // keeps the old accumulator alive
  fc->to(Device("cpu:1"));
  Tensor loss = fc(ones({1, 3}, TensorOptions().device(Device("cpu:1")))).sum();
  loss.backward();
  EXPECT_EQ(fc->weight.grad().device(), Device("cpu:1"));
  EXPECT_TRUE(old_out.defined());
}

}  // namespace
}  // namespace loom
