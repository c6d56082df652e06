// FileStore: a Store kept in one file, for processes on one machine (or a
// shared file system with working flock()).
//
// The file is an append-only log; every instance replays it into a map and,
// before each operation, reads whatever other processes appended since:
//
//   file    := "LOOMFS1\n", record*
//   record  := u8 op, u32 key_length, key, [u32 value_length, value]
//   op      := 1 set (has a value) | 2 delete (no value)
//
// (integers little-endian).  Readers hold a shared flock() while reading the
// tail, writers an exclusive one while reading the tail and appending, so
// add and compare_set are atomic across processes.  A record cut short by a
// writer that died mid-write is ignored and cut off by the next writer.
// get and wait poll the file (1 ms, backing off to 10 ms) until timeout().
// Counters are decimal text, as in the other stores.
//
// With world_size > 0 the file is removed by the last instance destroyed
// once world_size instances have been destroyed (keys
// "__loom_filestore/refcount" and ".../finished", like torch's FileStore);
// keys with that prefix are not counted by num_keys.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

class FileStore : public Store {
 public:
  // Opens (creating it if needed) the store file at path.  Throws loom::Error
  // naming path when it cannot be opened or is not a FileStore file.
  explicit FileStore(std::string path, int world_size = -1);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  // Waits up to timeout() for key; throws loom::Error naming key on timeout.
  Bytes get(const std::string& key) override;
  // Throws loom::Error when key holds something other than an integer.
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  // Keys set by users (the store's internal keys are not counted).
  int64_t num_keys() override;

  const std::string& path() const { return path_; }

 private:
  class FileLock;

  // Applies the records other instances appended since the last call.  The
  // caller holds mutex_ and a FileLock.
  void read_tail();
  // Appends one record (and the header if the file is empty) and applies it.
  // The caller holds mutex_ and an exclusive FileLock.
  void append(uint8_t op, const std::string& key, const Bytes* value);
  int64_t add_locked(const std::string& key, int64_t delta);
  bool has_all(const std::vector<std::string>& keys) const;

  std::string path_;
  int world_size_;
  int fd_ = -1;
  std::mutex mutex_;
  uint64_t offset_ = 0;  // bytes of the file applied to data_
  std::map<std::string, Bytes> data_;
};

}  // namespace distributed
}  // namespace loom
