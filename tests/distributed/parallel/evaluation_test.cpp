// Evaluation helpers: all_gather_concat (uneven per-rank rows, in rank
// order) and all_reduce_mean.
#include <thread>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/parallel/Evaluation.h"
#include "distributed/store/HashStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

using std::chrono::milliseconds;

void run_ranks(int size, const std::function<void(ProcessGroupPtr, int)>& fn) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(milliseconds(10000));
  ProcessGroupGlooOptions options;
  options.timeout = milliseconds(5000);
  std::vector<std::string> failures(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(std::make_shared<ProcessGroupGloo>(store, r, size, options), r);
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << size;
}

TEST(Evaluation, AllGatherConcatUnevenRowsInRankOrder) {
  const std::vector<int64_t> rows{2, 0, 3};
  run_ranks(3, [&](ProcessGroupPtr pg, int r) {
    // Rank r's rows hold 10 * r + row index.
    std::vector<float> v;
    for (int64_t i = 0; i < rows[r]; ++i) v.insert(v.end(), {10.0f * r + i, -1.0f});
    Tensor mine = rows[r] ? tensor(v, {rows[r], 2}) : zeros({0, 2});
    Tensor all = all_gather_concat(mine, pg);
    ASSERT_EQ(all.sizes(), (IntList{5, 2}));
    EXPECT_EQ(all.select(1, 0).to_vector<float>(), (std::vector<float>{0, 1, 20, 21, 22}));
    // int64 predictions (labels) too.
    Tensor labels = full({rows[r]}, r, kInt64);
    EXPECT_EQ(all_gather_concat(labels, pg).to_vector<int64_t>(),
              (std::vector<int64_t>{0, 0, 2, 2, 2}));
  });
}

TEST(Evaluation, AllGatherConcatRejectsMismatchedTrailingDims) {
  run_ranks(2, [](ProcessGroupPtr pg, int r) {
    EXPECT_LOOM_ERROR(all_gather_concat(zeros({2, r == 0 ? 3 : 4}), pg), "rank",
                      "all dims but 0");
  });
}

TEST(Evaluation, AllReduceMean) {
  run_ranks(3, [](ProcessGroupPtr pg, int r) {
    EXPECT_DOUBLE_EQ(all_reduce_mean(1.0 + r, pg), 2.0);
  });
  EXPECT_DOUBLE_EQ(all_reduce_mean(5.0, nullptr), 5.0);
}

}  // namespace
}  // namespace distributed
}  // namespace loom
