// FileStore specifics: the file's life cycle and damaged files.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "distributed/store/FileStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing {
namespace {

using distributed::Bytes;
using distributed::FileStore;
using distributed::to_string;

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name + "_" +
                           std::to_string(::getpid());
  std::remove(path.c_str());
  return path;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(FileStoreTest, LastOfWorldSizeInstancesRemovesTheFile) {
  const std::string path = temp_path("fs_cleanup");
  auto first = std::make_unique<FileStore>(path, 2);
  auto second = std::make_unique<FileStore>(path, 2);
  first->set("k", std::string("v"));
  first.reset();
  EXPECT_TRUE(exists(path));
  EXPECT_EQ(to_string(second->get("k")), "v");
  second.reset();
  EXPECT_FALSE(exists(path));
}

TEST(FileStoreTest, WithoutWorldSizeTheFileStays) {
  const std::string path = temp_path("fs_keep");
  { FileStore store(path); store.set("k", std::string("v")); }
  ASSERT_TRUE(exists(path));
  FileStore reopened(path);
  EXPECT_EQ(to_string(reopened.get("k")), "v");
  EXPECT_EQ(reopened.num_keys(), 1);
  std::remove(path.c_str());
}

TEST(FileStoreTest, RejectsFilesThatAreNotStores) {
  const std::string path = temp_path("fs_not_a_store");
  std::ofstream(path) << "just some text that is not a store\n";
  EXPECT_LOOM_ERROR(FileStore store(path), path, "not a loom FileStore file");
  std::remove(path.c_str());
  EXPECT_LOOM_ERROR(FileStore store("/nonexistent_dir_for_loom/store"),
                    "/nonexistent_dir_for_loom/store", "cannot open");
}

TEST(FileStoreTest, IgnoresAndRepairsARecordCutShort) {
  const std::string path = temp_path("fs_cut");
  FileStore store(path);
  store.set("good", std::string("1"));
  {
    // What a writer killed in the middle of a record leaves behind.
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    const char partial[] = {1, 4, 0, 0, 0, 'h', 'a'};
    ASSERT_EQ(::write(fd, partial, sizeof(partial)), static_cast<ssize_t>(sizeof(partial)));
    ::close(fd);
  }
  FileStore other(path);
  EXPECT_EQ(to_string(other.get("good")), "1");
  EXPECT_FALSE(other.check({"half"}));
  other.set("after", std::string("2"));
  EXPECT_EQ(to_string(store.get("after")), "2");
  FileStore third(path);
  EXPECT_EQ(third.num_keys(), 2);
  std::remove(path.c_str());
}

TEST(FileStoreTest, GetTimesOutNamingKeyAndFile) {
  const std::string path = temp_path("fs_timeout");
  FileStore store(path);
  store.set_timeout(std::chrono::milliseconds(100));
  EXPECT_LOOM_ERROR(store.get("absent"), "absent", "100 ms", path);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace testing
}  // namespace loom
