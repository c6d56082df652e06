// Every Store implementation against the same contract (Store.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/store/FileStore.h"
#include "distributed/store/HashStore.h"
#include "distributed/store/PrefixStore.h"
#include "distributed/store/TCPStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing {
namespace {

// A fresh path in the test's temporary directory (not created).
inline std::string temp_store_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  static int counter = 0;
  return std::string(dir ? dir : "/tmp") + "/" + name + "_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++);
}

// One logical store of some kind.  open() returns a handle on it: the first
// call creates it; later calls return another client of the same data (a new
// TCPStore client, another FileStore on the same file, ...), so tests can play
// several ranks.
class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  virtual std::shared_ptr<distributed::Store> open() = 0;
};

class HashHarness : public StoreHarness {
 public:
  std::shared_ptr<distributed::Store> open() override {
    store_->set_timeout(std::chrono::milliseconds(3000));
    return store_;
  }

 private:
  std::shared_ptr<distributed::HashStore> store_ = std::make_shared<distributed::HashStore>();
};

class TCPHarness : public StoreHarness {
 public:
  std::shared_ptr<distributed::Store> open() override {
    distributed::TCPStoreOptions options;
    options.timeout = std::chrono::milliseconds(3000);
    if (!master_) {
      options.is_master = true;
      master_ = std::make_shared<distributed::TCPStore>("127.0.0.1", 0, options);
      return master_;
    }
    return std::make_shared<distributed::TCPStore>("127.0.0.1", master_->port(), options);
  }

 private:
  std::shared_ptr<distributed::TCPStore> master_;
};

class FileHarness : public StoreHarness {
 public:
  ~FileHarness() override { std::remove(path_.c_str()); }
  std::shared_ptr<distributed::Store> open() override {
    auto store = std::make_shared<distributed::FileStore>(path_);
    store->set_timeout(std::chrono::milliseconds(3000));
    return store;
  }

 private:
  std::string path_ = temp_store_path("filestore");
};

// PrefixStores over one TCPStore.
class PrefixHarness : public StoreHarness {
 public:
  std::shared_ptr<distributed::Store> open() override {
    return std::make_shared<distributed::PrefixStore>("group0", tcp_.open());
  }

 private:
  TCPHarness tcp_;
};


using distributed::Bytes;
using distributed::Store;
using distributed::to_bytes;
using distributed::to_string;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct StoreKind {
  std::string name;
  std::function<std::unique_ptr<StoreHarness>()> make;
};

class StoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    store_ = harness_->open();
  }
  void TearDown() override {
    store_.reset();
    harness_.reset();
  }
  std::unique_ptr<StoreHarness> harness_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreTest, SetGetRoundTripsBinaryEmptyAndLargeValues) {
  const Bytes binary = {0, 1, 0, 255, 0, 'a', 0};
  Bytes large(1 << 20);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<uint8_t>(i * 131 + (i >> 11));
  store_->set("binary", binary);
  store_->set("empty", Bytes{});
  store_->set("large", large);
  store_->set("text", std::string("hello"));
  auto peer = harness_->open();
  EXPECT_EQ(peer->get("binary"), binary);
  EXPECT_EQ(peer->get("empty"), Bytes{});
  EXPECT_EQ(peer->get("large"), large);
  EXPECT_EQ(to_string(peer->get("text")), "hello");
  // Keys may hold any bytes too.
  const std::string odd_key("k\0ey/\xff", 6);
  peer->set(odd_key, std::string("v"));
  EXPECT_EQ(to_string(store_->get(odd_key)), "v");
  store_->set("text", std::string("overwritten"));
  EXPECT_EQ(to_string(peer->get("text")), "overwritten");
}

TEST_P(StoreTest, GetWaitsForALaterSetFromAnotherThread) {
  std::shared_ptr<Store> peer = harness_->open();
  const auto start = Clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    peer->set("late", std::string("arrived"));
  });
  EXPECT_EQ(to_string(store_->get("late")), "arrived");
  EXPECT_GE(Clock::now() - start, milliseconds(90));
  setter.join();
}

TEST_P(StoreTest, GetAndSetFromThreadsSharingOneHandle) {
  // A get blocked in one thread must not hold up a set from another thread
  // through the same handle.
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    store_->set("shared", std::string("x"));
  });
  EXPECT_EQ(to_string(store_->get("shared")), "x");
  setter.join();
}

TEST_P(StoreTest, AddFromEightThreadsIsAtomic) {
  std::vector<std::shared_ptr<Store>> handles;
  for (int t = 0; t < 8; ++t) handles.push_back(t % 2 == 0 ? store_ : harness_->open());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) handles[t]->add("counter", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(store_->add("counter", 0), 800);
  EXPECT_EQ(to_string(store_->get("counter")), "800");
  EXPECT_EQ(store_->add("counter", -801), -1);
  EXPECT_EQ(store_->add("fresh", 5), 5);
  store_->set("not_a_number", std::string("abc"));
  EXPECT_LOOM_ERROR(store_->add("not_a_number", 1), "not_a_number", "not an integer");
}

TEST_P(StoreTest, CompareSetSemantics) {
  // Absent key and empty expected: sets.
  EXPECT_EQ(to_string(store_->compare_set("cas", Bytes{}, to_bytes("first"))), "first");
  EXPECT_EQ(to_string(store_->get("cas")), "first");
  // Mismatch: value untouched, current value returned.
  EXPECT_EQ(to_string(store_->compare_set("cas", to_bytes("wrong"), to_bytes("second"))), "first");
  EXPECT_EQ(to_string(store_->get("cas")), "first");
  // Match: swaps.
  EXPECT_EQ(to_string(store_->compare_set("cas", to_bytes("first"), to_bytes("second"))), "second");
  EXPECT_EQ(to_string(store_->get("cas")), "second");
  // Absent key with a non-empty expected: nothing set, expected returned.
  EXPECT_EQ(to_string(store_->compare_set("absent", to_bytes("x"), to_bytes("y"))), "x");
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreTest, Check) {
  EXPECT_TRUE(store_->check({}));
  EXPECT_FALSE(store_->check({"a"}));
  store_->set("a", std::string("1"));
  EXPECT_TRUE(store_->check({"a"}));
  EXPECT_FALSE(store_->check({"a", "b"}));
  harness_->open()->set("b", Bytes{});
  EXPECT_TRUE(store_->check({"a", "b"}));
}

TEST_P(StoreTest, WaitReturnsOnceAllKeysAreSet) {
  auto peer = harness_->open();
  std::thread setter([&] {
    peer->set("w1", std::string("1"));
    std::this_thread::sleep_for(milliseconds(50));
    peer->set("w2", std::string("2"));
  });
  store_->wait({"w1", "w2"}, milliseconds(3000));
  EXPECT_TRUE(store_->check({"w1", "w2"}));
  setter.join();
}

TEST_P(StoreTest, WaitTimesOutNamingTheKey) {
  store_->set("present", std::string("1"));
  const auto start = Clock::now();
  EXPECT_LOOM_ERROR(store_->wait({"present", "missing_key"}, milliseconds(200)), "missing_key",
                    "200 ms");
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, milliseconds(190));
  EXPECT_LT(waited, milliseconds(1500));
  // get() gives up after the store's timeout.
  store_->set_timeout(milliseconds(150));
  EXPECT_LOOM_ERROR(store_->get("never_set"), "never_set");
  // The handle still works after a timeout.
  EXPECT_EQ(to_string(store_->get("present")), "1");
}

TEST_P(StoreTest, DeleteKeyAndNumKeys) {
  EXPECT_EQ(store_->num_keys(), 0);
  store_->set("a", std::string("1"));
  store_->set("b", std::string("2"));
  store_->add("c", 3);
  EXPECT_EQ(store_->num_keys(), 3);
  auto peer = harness_->open();
  EXPECT_EQ(peer->num_keys(), 3);
  EXPECT_TRUE(peer->delete_key("a"));
  EXPECT_FALSE(store_->delete_key("a"));
  EXPECT_FALSE(store_->check({"a"}));
  EXPECT_EQ(store_->num_keys(), 2);
  store_->set("a", std::string("again"));
  EXPECT_EQ(to_string(peer->get("a")), "again");
  EXPECT_EQ(peer->num_keys(), 3);
}

INSTANTIATE_TEST_SUITE_P(
    AllStores, StoreTest,
    ::testing::Values(
        StoreKind{"HashStore", [] { return std::unique_ptr<StoreHarness>(new HashHarness); }},
        StoreKind{"TCPStore", [] { return std::unique_ptr<StoreHarness>(new TCPHarness); }},
        StoreKind{"FileStore", [] { return std::unique_ptr<StoreHarness>(new FileHarness); }},
        StoreKind{"PrefixStore", [] { return std::unique_ptr<StoreHarness>(new PrefixHarness); }}),
    [](const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

}  // namespace
}  // namespace testing
}  // namespace loom
