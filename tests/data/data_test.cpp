#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "tensor/CudaRuntime.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using data::DataLoader;
using data::DataLoaderOptions;

// A dataset whose example i is (i, i % 3), to see exactly what the loader does.
class Counting : public data::Dataset {
 public:
  explicit Counting(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  data::Example get(int64_t i) const override {
    LOOM_CHECK(i != fail_at_, "Counting: failing on purpose at ", i);
    return {scalar_tensor(static_cast<float>(i)), scalar_tensor(i % 3, kInt64)};
  }

 private:
  int64_t n_, fail_at_;
};

std::vector<float> all_values(DataLoader& loader) {
  std::vector<float> out;
  for (const auto& batch : loader) {
    const auto v = batch.data.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(Samplers, SequentialRandomBatch) {
  data::SequentialSampler seq(5);
  EXPECT_EQ(seq.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  data::RandomSampler rnd(10, 7);
  const auto e0 = rnd.indices();
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 10u);
  EXPECT_EQ(rnd.indices(), e0);  // same epoch, same order
  rnd.set_epoch(1);
  EXPECT_NE(rnd.indices(), e0);
  data::BatchSampler keep(std::make_shared<data::SequentialSampler>(7), 3, false);
  EXPECT_EQ(keep.size(), 3);
  EXPECT_EQ(keep.batches().back(), (std::vector<int64_t>{6}));
  data::BatchSampler drop(std::make_shared<data::SequentialSampler>(7), 3, true);
  EXPECT_EQ(drop.size(), 2);
  EXPECT_EQ(drop.batches().size(), 2u);
}

TEST(DataLoader, BatchesInOrderWithCollatedTargets) {
  DataLoader loader(std::make_shared<Counting>(7), DataLoaderOptions(3));
  EXPECT_EQ(loader.size(), 3);
  std::vector<IntList> shapes;
  std::vector<int64_t> targets;
  for (const auto& batch : loader) {
    shapes.push_back(batch.data.sizes());
    for (int64_t t : batch.target.to_vector<int64_t>()) targets.push_back(t);
  }
  EXPECT_EQ(shapes, (std::vector<IntList>{{3}, {3}, {1}}));
  EXPECT_EQ(targets, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(DataLoader, WorkersGiveTheSameBatchesInTheSameOrder) {
  auto ds = std::make_shared<Counting>(50);
  DataLoader plain(ds, DataLoaderOptions(4).shuffle(true).seed(3));
  DataLoader threaded(ds, DataLoaderOptions(4).shuffle(true).seed(3).num_workers(3).prefetch_factor(2));
  const auto a = all_values(plain);
  const auto b = all_values(threaded);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 50u);
  // A second epoch reshuffles.
  EXPECT_NE(all_values(plain), a);
}

TEST(DataLoader, PinMemoryGivesTheSameBatchesPinnedWhenAGpuIsVisible) {
  for (int64_t workers : {0, 2}) {
    DataLoader plain(std::make_shared<Counting>(7), DataLoaderOptions(3).num_workers(workers));
    DataLoader pinned(std::make_shared<Counting>(7),
                      DataLoaderOptions(3).num_workers(workers).pin_memory(true));
    std::vector<Tensor> expected, got;
    for (const auto& batch : plain) expected.push_back(batch.data);
    for (const auto& batch : pinned) {
      got.push_back(batch.data);
      // Without a usable GPU pin_memory changes nothing, as in PyTorch.
      EXPECT_EQ(batch.data.is_pinned(), cuda::is_available());
      EXPECT_EQ(batch.target.is_pinned(), cuda::is_available());
      EXPECT_TRUE(batch.data.is_cpu());
    }
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(testing::AllClose(got[i], expected[i], 0, 0)) << "batch " << i;
  }
}

TEST(DataLoader, DropLastAndEarlyExit) {
  DataLoader loader(std::make_shared<Counting>(10), DataLoaderOptions(4).drop_last(true).num_workers(2));
  EXPECT_EQ(all_values(loader).size(), 8u);
  int seen = 0;
  for (const auto& batch : loader) {
    (void)batch;
    if (++seen == 1) break;  // leaving early must stop the workers cleanly
  }
  EXPECT_EQ(seen, 1);
}

TEST(DataLoader, WorkerErrorReachesTheLoop) {
  DataLoader loader(std::make_shared<Counting>(20, 13), DataLoaderOptions(4).num_workers(2));
  EXPECT_LOOM_ERROR(all_values(loader), "failing on purpose at 13");
}

TEST(DataLoader, BadOptionsThrow) {
  auto ds = std::make_shared<Counting>(4);
  EXPECT_LOOM_ERROR(DataLoader(ds, DataLoaderOptions(0)), "batch_size");
  EXPECT_LOOM_ERROR(DataLoader(ds, DataLoaderOptions(2).shuffle(true),
                               std::make_shared<data::SequentialSampler>(4)),
                    "mutually exclusive");
}

// ---- MNIST IDX ------------------------------------------------------------------

std::string temp_dir() {
  char tmpl[] = "/tmp/loom_mnist_XXXXXX";
  return mkdtemp(tmpl);
}

void put_u32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string idx_images(uint32_t n) {
  std::string s;
  put_u32(s, 2051);
  put_u32(s, n);
  put_u32(s, 28);
  put_u32(s, 28);
  for (uint32_t i = 0; i < n * 784; ++i) s.push_back(static_cast<char>(i % 256));
  return s;
}

std::string idx_labels(uint32_t n) {
  std::string s;
  put_u32(s, 2049);
  put_u32(s, n);
  for (uint32_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(MNIST, ReadsPlainAndGzipIdx) {
  const std::string dir = temp_dir();
  write_file(dir + "/train-images-idx3-ubyte", idx_images(5));
  write_file(dir + "/train-labels-idx1-ubyte", idx_labels(5));
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", idx_images(3));
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", idx_labels(3));
  data::datasets::MNIST train(dir, true, {0.0, 1.0});
  data::datasets::MNIST test(dir, false, {0.5, 2.0});
  EXPECT_EQ(train.size(), 5);
  EXPECT_EQ(test.size(), 3);
  auto ex = train.get(1);
  EXPECT_EQ(ex.data.sizes(), (IntList{1, 28, 28}));
  EXPECT_EQ(ex.target.item<int64_t>(), 1);
  // Pixel 0 of image 1 is byte 784 % 256 = 16; scaled to [0, 1].
  EXPECT_NEAR(ex.data.to_vector<float>()[0], 16.0 / 255.0, 1e-6);
  // Normalised: (x / 255 - 0.5) / 2.
  EXPECT_NEAR(test.get(0).data.to_vector<float>()[255], (255.0 / 255.0 - 0.5) / 2.0, 1e-6);
  auto batch = train.get_batch({4, 0});
  EXPECT_EQ(batch.target.to_vector<int64_t>(), (std::vector<int64_t>{4, 0}));
}

TEST(MNIST, CorruptFilesNameTheFileAndProblem) {
  const std::string dir = temp_dir();
  std::string bad = idx_images(2);
  bad[3] = 0x01;  // wrong magic
  write_file(dir + "/train-images-idx3-ubyte", bad);
  write_file(dir + "/train-labels-idx1-ubyte", idx_labels(2));
  EXPECT_LOOM_ERROR(data::datasets::MNIST(dir, true), dir + "/train-images-idx3-ubyte",
                    "bad magic number");

  std::string truncated = idx_images(2);
  truncated.resize(truncated.size() - 100);
  write_file(dir + "/train-images-idx3-ubyte", truncated);
  EXPECT_LOOM_ERROR(data::datasets::MNIST(dir, true), "short read", "byte offset 16");

  write_file(dir + "/train-images-idx3-ubyte", idx_images(2));
  write_file(dir + "/train-labels-idx1-ubyte", idx_labels(3));
  EXPECT_LOOM_ERROR(data::datasets::MNIST(dir, true), "count mismatch", "has 2 images",
                    "has 3 labels");
}

TEST(MNIST, MissingFolderSaysHowToSetUp) {
  EXPECT_LOOM_ERROR(data::datasets::MNIST("/nonexistent/mnist", true), "tools/setup.sh",
                    "--data-dir");
}

TEST(RandomClassification, ReproducibleAnyOrder) {
  data::datasets::RandomClassification ds(10, {3, 4, 4}, 9, 1);
  auto a = ds.get_batch({2, 5});
  auto b = ds.get(5);
  EXPECT_TRUE(testing::AllClose(a.data.select(0, 1), b.data));
  EXPECT_EQ(a.target.to_vector<int64_t>()[1], b.target.item<int64_t>());
  for (int64_t t : ds.get_batch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}).target.to_vector<int64_t>()) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 9);
  }
}

}  // namespace
}  // namespace loom
