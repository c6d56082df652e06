// Thread names: set, read back, truncated to Linux's 15 characters,
// inherited by threads a named thread starts, restored by the guard.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "tensor/ThreadName.h"

namespace loom {
namespace {

TEST(ThreadName, SetAndRead) {
  std::thread([] {
    set_current_thread_name("loom-test");
    EXPECT_EQ(current_thread_name(), "loom-test");
  }).join();
}

TEST(ThreadName, NamesAnotherThread) {
  std::promise<void> named;
  std::promise<std::string> seen;
  std::thread t([&] {
    named.get_future().wait();
    seen.set_value(current_thread_name());
  });
  set_thread_name(t, "loom-other");
  named.set_value();
  EXPECT_EQ(seen.get_future().get(), "loom-other");
  t.join();
}

TEST(ThreadName, KeepsTheFirstFifteenCharacters) {
  std::thread([] {
    set_current_thread_name("loom-0123456789abcdef");
    EXPECT_EQ(current_thread_name(), "loom-0123456789");
  }).join();
}

TEST(ThreadName, GuardNamesThreadsStartedInItsScopeAndRestores) {
  std::thread([] {
    set_current_thread_name("outer");
    std::string child_name;
    {
      ThreadNameGuard guard("loom-child");
      EXPECT_EQ(current_thread_name(), "loom-child");
      std::thread([&] { child_name = current_thread_name(); }).join();
    }
    EXPECT_EQ(child_name, "loom-child");
    EXPECT_EQ(current_thread_name(), "outer");
  }).join();
}

}  // namespace
}  // namespace loom
