// The host half of the cuDNN convolution (tensor/cuda/ConvAlgoCache.h and
// tensor/cuda/HandlePool.h), no GPU needed: every field of the shape key
// tells two convolutions apart, the cache keeps the first choice per key
// under concurrent use, and library handles are one per (device, thread),
// recycled when a thread exits.
#include <set>
#include <thread>
#include <vector>

#include "tensor/cuda/ConvAlgoCache.h"
#include "tensor/cuda/HandlePool.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using cuda::ConvAlgoCache;
using cuda::ConvKey;
using cuda::ConvKeyHash;
using cuda::ConvKeyParams;
using cuda::ConvPass;
using cuda::make_conv_key;

ConvKeyParams base_params() {
  ConvKeyParams p;
  p.device = 0;
  p.dtype = 0;
  p.batch = 8;
  p.in_channels = 3;
  p.height = 32;
  p.width = 30;
  p.out_channels = 16;
  p.kernel_h = 3;
  p.kernel_w = 5;
  return p;
}

TEST(ConvAlgoCache, EveryFieldChangesTheKey) {
  const ConvKey base = make_conv_key(base_params());
  EXPECT_EQ(base, make_conv_key(base_params()));
  EXPECT_EQ(ConvKeyHash()(base), ConvKeyHash()(make_conv_key(base_params())));
  // One mutation per field; each must give a key unequal to the base and to the others.
  std::vector<void (*)(ConvKeyParams&)> mutations = {
      [](ConvKeyParams& p) { p.device = 1; },
      [](ConvKeyParams& p) { p.dtype = 1; },
      [](ConvKeyParams& p) { p.pass = ConvPass::kBackwardData; },
      [](ConvKeyParams& p) { p.pass = ConvPass::kBackwardFilter; },
      [](ConvKeyParams& p) { p.batch = 9; },
      [](ConvKeyParams& p) { p.in_channels = 4; },
      [](ConvKeyParams& p) { p.height = 31; },
      [](ConvKeyParams& p) { p.width = 31; },
      [](ConvKeyParams& p) { p.out_channels = 17; },
      [](ConvKeyParams& p) { p.kernel_h = 5; },
      [](ConvKeyParams& p) { p.kernel_w = 3; },  // kernel h/w swapped vs base: still distinct
      [](ConvKeyParams& p) { p.stride_h = 2; },
      [](ConvKeyParams& p) { p.stride_w = 2; },
      [](ConvKeyParams& p) { p.pad_h = 1; },
      [](ConvKeyParams& p) { p.pad_w = 1; },
      [](ConvKeyParams& p) { p.dilation_h = 2; },
      [](ConvKeyParams& p) { p.dilation_w = 2; },
      [](ConvKeyParams& p) { p.groups = 3; },
      [](ConvKeyParams& p) { p.allow_tf32 = true; },
      [](ConvKeyParams& p) { p.benchmark = true; },
      [](ConvKeyParams& p) { p.channels_last = true; },
  };
  std::vector<ConvKey> keys = {base};
  for (auto mutate : mutations) {
    ConvKeyParams p = base_params();
    mutate(p);
    keys.push_back(make_conv_key(p));
  }
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " vs " << j;
  // Swapped height/width must not collide with the original.
  ConvKeyParams swapped = base_params();
  std::swap(swapped.height, swapped.width);
  EXPECT_NE(make_conv_key(swapped), base);
}

TEST(ConvAlgoCache, FirstInsertWins) {
  ConvAlgoCache<int> cache;
  const ConvKey k = make_conv_key(base_params());
  int v = -1;
  EXPECT_FALSE(cache.find(k, &v));
  EXPECT_EQ(cache.insert(k, 7), 7);
  EXPECT_EQ(cache.insert(k, 9), 7);  // a racing second choice is dropped
  EXPECT_TRUE(cache.find(k, &v));
  EXPECT_EQ(v, 7);
  EXPECT_EQ(cache.size(), 1u);
  cache.clear();
  EXPECT_FALSE(cache.find(k, &v));
}

TEST(ConvAlgoCache, ConcurrentUseKeepsOneChoicePerKey) {
  ConvAlgoCache<int> cache;
  std::vector<std::thread> threads;
  std::vector<std::vector<int>> seen(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int64_t b = 0; b < 50; ++b) {
        ConvKeyParams p = base_params();
        p.batch = b;
        const ConvKey k = make_conv_key(p);
        int v;
        seen[t].push_back(cache.find(k, &v) ? v : cache.insert(k, t));
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.size(), 50u);
  for (int b = 0; b < 50; ++b)
    for (int t = 1; t < 8; ++t) EXPECT_EQ(seen[t][b], seen[0][b]) << "batch " << b;
}

struct TestTag {};

TEST(HandlePool, OneHandlePerDeviceAndThreadRecycledAtThreadExit) {
  // Leaked, like the real pools: this thread's slot still points at the pool
  // when the thread-local destructors run at process exit.
  static auto* created_for = new std::vector<int>;
  static auto* pool_ptr = new cuda::HandlePool<int>([](int device) {
    created_for->push_back(device);
    return 100 + static_cast<int>(created_for->size());
  });
  cuda::HandlePool<int>& pool = *pool_ptr;
  // Same thread, same device: the same handle; another device: another handle.
  const int h0 = cuda::thread_handle<TestTag>(pool, 0);
  EXPECT_EQ(cuda::thread_handle<TestTag>(pool, 0), h0);
  const int h1 = cuda::thread_handle<TestTag>(pool, 1);
  EXPECT_NE(h1, h0);
  EXPECT_EQ(pool.created(), 2);
  // A second thread gets its own handle, returned to the pool when it exits ...
  int other = -1;
  std::thread([&] { other = cuda::thread_handle<TestTag>(pool, 0); }).join();
  EXPECT_NE(other, h0);
  EXPECT_EQ(pool.created(), 3);
  EXPECT_EQ(pool.idle(), 1);
  // ... and a third thread reuses it instead of creating one.
  int reused = -1;
  std::thread([&] { reused = cuda::thread_handle<TestTag>(pool, 0); }).join();
  EXPECT_EQ(reused, other);
  EXPECT_EQ(pool.created(), 3);
  EXPECT_EQ(*created_for, (std::vector<int>{0, 1, 0}));
}

}  // namespace
}  // namespace loom
