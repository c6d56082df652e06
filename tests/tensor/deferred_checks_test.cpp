// The host side of deferred checks, with stand-in verdicts (the CUDA ones,
// an event and a pinned copy, are exercised by the gpu tests).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tensor/DeferredChecks.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

// A verdict the test delivers by hand.
struct FakeVerdict {
  bool arrived = false;
  std::string failure;
  int waits = 0;
};

std::shared_ptr<FakeVerdict> defer_fake(std::string failure = "") {
  auto v = std::make_shared<FakeVerdict>();
  v->failure = std::move(failure);
  defer_check({[v] { return v->arrived; },
               [v] {
                 ++v->waits;
                 v->arrived = true;
               },
               [v] { return v->failure; }});
  return v;
}

class DeferredChecks : public ::testing::Test {
 protected:
  // Leaves no check behind for the next test.
  void TearDown() override {
    while (pending_deferred_checks() > 0) {
      try {
        raise_deferred_errors(true);
      } catch (const Error&) {
      }
    }
  }
};

TEST_F(DeferredChecks, NothingIsRaisedBeforeTheVerdictArrives) {
  auto bad = defer_fake("gather: index 7 is out of bounds");
  EXPECT_NO_THROW(raise_deferred_errors());
  EXPECT_EQ(pending_deferred_checks(), 1u);
  bad->arrived = true;
  EXPECT_LOOM_ERROR(raise_deferred_errors(), "gather: index 7 is out of bounds");
  // Thrown once, then forgotten.
  EXPECT_EQ(pending_deferred_checks(), 0u);
  EXPECT_NO_THROW(raise_deferred_errors());
}

TEST_F(DeferredChecks, PassedChecksAreForgottenSilently) {
  auto a = defer_fake(), b = defer_fake();
  a->arrived = true;
  raise_deferred_errors();
  EXPECT_EQ(pending_deferred_checks(), 1u);
  b->arrived = true;
  raise_deferred_errors();
  EXPECT_EQ(pending_deferred_checks(), 0u);
}

TEST_F(DeferredChecks, TheOldestArrivedFailureComesFirst) {
  auto first = defer_fake("first"), pending = defer_fake("still running"),
       second = defer_fake("second");
  first->arrived = second->arrived = true;
  EXPECT_LOOM_ERROR(raise_deferred_errors(), "first");
  EXPECT_LOOM_ERROR(raise_deferred_errors(), "second");
  EXPECT_EQ(pending_deferred_checks(), 1u);
  EXPECT_EQ(pending->waits, 0);
}

TEST_F(DeferredChecks, WaitWaitsForEveryPendingCheck) {
  auto a = defer_fake(), b = defer_fake("b failed");
  EXPECT_LOOM_ERROR(raise_deferred_errors(true), "b failed");
  EXPECT_EQ(a->waits, 1);
  EXPECT_EQ(b->waits, 1);
  EXPECT_EQ(pending_deferred_checks(), 0u);
}

TEST_F(DeferredChecks, TooManyPendingWaitsForTheOldest) {
  auto oldest = defer_fake();
  for (int i = 0; i < 1100; ++i) defer_fake();
  EXPECT_EQ(oldest->waits, 1);
  EXPECT_LE(pending_deferred_checks(), 1024u);
}

TEST_F(DeferredChecks, AFailureThrownWhileTrimmingKeepsTheNewCheck) {
  auto bad = defer_fake("an older failure");
  bad->arrived = true;
  for (int i = 0; i < 1023; ++i) defer_fake();  // 1024 pending
  EXPECT_LOOM_ERROR(defer_fake("the newest"), "an older failure");
  EXPECT_EQ(pending_deferred_checks(), 1024u);  // the newest is registered
  EXPECT_LOOM_ERROR(raise_deferred_errors(true), "the newest");
}

TEST_F(DeferredChecks, IncompleteChecksAreRefused) {
  EXPECT_LOOM_ERROR(defer_check({}), "defer_check", "arrived, wait and failure");
}

TEST_F(DeferredChecks, SyncModeSwitch) {
  const bool saved = sync_checks();
  set_sync_checks(true);
  EXPECT_TRUE(sync_checks());
  set_sync_checks(false);
  EXPECT_FALSE(sync_checks());
  set_sync_checks(saved);
}

}  // namespace
}  // namespace loom
