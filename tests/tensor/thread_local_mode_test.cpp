// ThreadLocalMode and ModeGuard: defaults, scoped values restored, one value
// per thread, and stream closures running with their submitter's value.
#include "tensor/ThreadLocalMode.h"

#include <thread>

#include <gtest/gtest.h>

#include "tensor/Stream.h"

namespace loom {
namespace {

struct OffByDefault : ThreadLocalMode<OffByDefault, false> {};
struct OnByDefault : ThreadLocalMode<OnByDefault, true> {};

TEST(ThreadLocalMode, StartsAtItsDefault) {
  EXPECT_FALSE(OffByDefault::is_enabled());
  EXPECT_TRUE(OnByDefault::is_enabled());
}

TEST(ThreadLocalMode, NestedGuardsRestoreTheValueBeforeThem) {
  {
    ModeGuard<OffByDefault> on(true);
    EXPECT_TRUE(OffByDefault::is_enabled());
    {
      ModeGuard<OffByDefault> off(false);
      EXPECT_FALSE(OffByDefault::is_enabled());
      // Another mode is a separate value.
      EXPECT_TRUE(OnByDefault::is_enabled());
    }
    EXPECT_TRUE(OffByDefault::is_enabled());
  }
  EXPECT_FALSE(OffByDefault::is_enabled());
}

TEST(ThreadLocalMode, EachThreadHasItsOwnValue) {
  ModeGuard<OffByDefault> on(true);
  bool seen_by_other_thread = true;
  std::thread other([&] { seen_by_other_thread = OffByDefault::is_enabled(); });
  other.join();
  EXPECT_FALSE(seen_by_other_thread);
  EXPECT_TRUE(OffByDefault::is_enabled());
}

TEST(ThreadLocalMode, StreamClosuresRunWithTheSubmittersValue) {
  Stream s = Stream::default_stream(Device("cpu:1"));
  bool inside_on = false, inside_off = true, on_by_default_inside = true, after_change = true;
  {
    ModeGuard<OffByDefault> on(true);
    s.submit([&] { inside_on = OffByDefault::is_enabled(); });
  }
  s.submit([&] {
    inside_off = OffByDefault::is_enabled();
    OffByDefault::set_enabled(true);  // a closure's change stays in the closure
  });
  s.submit([&] { after_change = OffByDefault::is_enabled(); });
  {
    ModeGuard<OnByDefault> off(false);
    s.submit([&] { on_by_default_inside = OnByDefault::is_enabled(); });
  }
  s.synchronize();
  EXPECT_TRUE(inside_on);
  EXPECT_FALSE(inside_off);
  EXPECT_FALSE(after_change);
  EXPECT_FALSE(on_by_default_inside);
  EXPECT_FALSE(OffByDefault::is_enabled());
}

}  // namespace
}  // namespace loom
