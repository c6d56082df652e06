// PrefixStore: namespacing and timeout forwarding.
#include <chrono>
#include <memory>
#include <string>

#include "distributed/store/HashStore.h"
#include "distributed/store/PrefixStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing {
namespace {

using distributed::HashStore;
using distributed::PrefixStore;
using distributed::to_string;
using std::chrono::milliseconds;

TEST(PrefixStoreTest, KeysLiveUnderThePrefix) {
  auto base = std::make_shared<HashStore>();
  PrefixStore a("a", base);
  PrefixStore b("b", base);
  a.set("k", std::string("from a"));
  b.set("k", std::string("from b"));
  EXPECT_EQ(to_string(base->get("a/k")), "from a");
  EXPECT_EQ(to_string(base->get("b/k")), "from b");
  EXPECT_EQ(to_string(a.get("k")), "from a");
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(to_string(base->get("a/n")), "2");
  EXPECT_FALSE(b.check({"n"}));
  EXPECT_TRUE(a.check({"k", "n"}));
  EXPECT_TRUE(b.delete_key("k"));
  EXPECT_TRUE(a.check({"k"}));
  EXPECT_EQ(to_string(a.compare_set("k", distributed::to_bytes("from a"),
                                    distributed::to_bytes("swapped"))),
            "swapped");
  EXPECT_EQ(to_string(base->get("a/k")), "swapped");
}

TEST(PrefixStoreTest, PrefixesNest) {
  auto base = std::make_shared<HashStore>();
  auto outer = std::make_shared<PrefixStore>("outer", base);
  PrefixStore inner("inner", outer);
  inner.set("k", std::string("v"));
  EXPECT_TRUE(base->check({"outer/inner/k"}));
  EXPECT_EQ(inner.prefix(), "inner");
  EXPECT_EQ(inner.underlying_store(), outer);
}

TEST(PrefixStoreTest, ForwardsTheTimeoutAndNamesPrefixedKeysWhenWaiting) {
  auto base = std::make_shared<HashStore>();
  base->set_timeout(milliseconds(120));
  PrefixStore store("group", base);
  EXPECT_EQ(store.timeout(), milliseconds(120));
  EXPECT_LOOM_ERROR(store.get("absent"), "group/absent");
  EXPECT_LOOM_ERROR(store.wait({"w"}), "group/w");
  // Its own timeout may differ from the wrapped store's.
  base->set_timeout(milliseconds(3000));
  store.set_timeout(milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_LOOM_ERROR(store.get("absent"), "group/absent", "50 ms");
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
}

TEST(PrefixStoreTest, RejectsANullStore) {
  EXPECT_LOOM_ERROR(PrefixStore("p", nullptr), "null", "'p'");
}

}  // namespace
}  // namespace testing
}  // namespace loom
