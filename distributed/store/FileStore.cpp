#include "distributed/store/FileStore.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tensor/Error.h"

namespace loom {
namespace distributed {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kMagic[] = "LOOMFS1\n";
constexpr size_t kMagicSize = 8;
constexpr uint8_t kSetRecord = 1;
constexpr uint8_t kDeleteRecord = 2;
constexpr char kInternalPrefix[] = "__loom_filestore/";

std::string refcount_key() { return std::string(kInternalPrefix) + "refcount"; }
std::string finished_key() { return std::string(kInternalPrefix) + "finished"; }

bool is_internal(const std::string& key) {
  return key.compare(0, sizeof(kInternalPrefix) - 1, kInternalPrefix) == 0;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + ("'" + key + "'");
  return out;
}

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t get_u32(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t(uint8_t(p[i])) << (8 * i);
  return value;
}

Clock::time_point deadline_after(milliseconds timeout) {
  constexpr milliseconds kMax{100LL * 24 * 3600 * 1000};
  return Clock::now() + std::max(milliseconds(0), std::min(timeout, kMax));
}

}  // namespace

// Holds flock() on the store file for one operation.  Waits at most the
// store's timeout, so a stopped process holding the lock cannot hang us.
class FileStore::FileLock {
 public:
  FileLock(const FileStore& store, bool exclusive) : fd_(store.fd_) {
    const auto deadline = deadline_after(store.timeout_);
    const int mode = (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
    while (::flock(fd_, mode) != 0) {
      LOOM_CHECK(errno == EWOULDBLOCK || errno == EINTR, "FileStore: cannot lock ", store.path_,
                 ": ", std::strerror(errno));
      LOOM_CHECK(Clock::now() < deadline, "FileStore: could not lock ", store.path_, " within ",
                 store.timeout_.count(), " ms (another process holds it)");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

FileStore::FileStore(std::string path, int world_size)
    : path_(std::move(path)), world_size_(world_size) {
  LOOM_CHECK(!path_.empty(), "FileStore: path must not be empty");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  LOOM_CHECK(fd_ >= 0, "FileStore: cannot open ", path_, ": ", std::strerror(errno));
  try {
    std::lock_guard<std::mutex> guard(mutex_);
    FileLock lock(*this, /*exclusive=*/true);
    read_tail();
    add_locked(refcount_key(), 1);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

FileStore::~FileStore() {
  try {
    std::lock_guard<std::mutex> guard(mutex_);
    FileLock lock(*this, /*exclusive=*/true);
    read_tail();
    const int64_t finished = add_locked(finished_key(), 1);
    const int64_t references = add_locked(refcount_key(), -1);
    if (world_size_ > 0 && references == 0 && finished >= world_size_) ::unlink(path_.c_str());
  } catch (const std::exception&) {
    // A destructor must not throw; the file is left behind at worst.
  }
  ::close(fd_);
}

void FileStore::read_tail() {
  struct stat st {};
  LOOM_CHECK(::fstat(fd_, &st) == 0, "FileStore: cannot stat ", path_, ": ", std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < offset_) {
    // The file was cut shorter than what we applied: start over.
    offset_ = 0;
    data_.clear();
  }
  if (size == offset_) return;
  std::string tail(size - offset_, '\0');
  size_t got = 0;
  while (got < tail.size()) {
    const ssize_t n = ::pread(fd_, &tail[got], tail.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    LOOM_CHECK(n >= 0, "FileStore: cannot read ", path_, ": ", std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  tail.resize(got);
  size_t pos = 0;
  if (offset_ == 0) {
    if (tail.size() < kMagicSize) return;  // a header still being written
    LOOM_CHECK(tail.compare(0, kMagicSize, kMagic) == 0, "FileStore: ", path_,
               " is not a loom FileStore file (it does not start with \"LOOMFS1\")");
    pos = kMagicSize;
  }
  // Applies whole records; a cut-short one at the end is left for later.
  while (tail.size() - pos >= 5) {
    const uint8_t op = static_cast<uint8_t>(tail[pos]);
    LOOM_CHECK(op == kSetRecord || op == kDeleteRecord, "FileStore: ", path_,
               " is corrupt: unknown record type ", int(op), " at byte ", offset_ + pos);
    const uint64_t key_size = get_u32(&tail[pos + 1]);
    size_t end = pos + 5 + key_size;
    if (end > tail.size()) break;
    std::string key = tail.substr(pos + 5, key_size);
    if (op == kDeleteRecord) {
      data_.erase(key);
    } else {
      if (tail.size() - end < 4) break;
      const uint64_t value_size = get_u32(&tail[end]);
      if (tail.size() - end - 4 < value_size) break;
      const char* value = &tail[end + 4];
      data_[std::move(key)] = Bytes(value, value + value_size);
      end += 4 + value_size;
    }
    pos = end;
  }
  offset_ += pos;
}

void FileStore::append(uint8_t op, const std::string& key, const Bytes* value) {
  LOOM_CHECK(key.size() <= UINT32_MAX, "FileStore: key of ", key.size(), " bytes is too long");
  LOOM_CHECK(!value || value->size() <= UINT32_MAX, "FileStore: value of ", value->size(),
             " bytes is too long (limit 4 GiB)");
  struct stat st {};
  LOOM_CHECK(::fstat(fd_, &st) == 0, "FileStore: cannot stat ", path_, ": ", std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) > offset_) {
    // A writer died mid-record: cut its partial record off before appending.
    LOOM_CHECK(::ftruncate(fd_, static_cast<off_t>(offset_)) == 0, "FileStore: cannot truncate ",
               path_, ": ", std::strerror(errno));
  }
  std::string record;
  if (offset_ == 0) record.append(kMagic, kMagicSize);
  record.push_back(static_cast<char>(op));
  put_u32(record, static_cast<uint32_t>(key.size()));
  record += key;
  if (value) {
    put_u32(record, static_cast<uint32_t>(value->size()));
    record.append(reinterpret_cast<const char*>(value->data()), value->size());
  }
  size_t written = 0;
  while (written < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + written, record.size() - written);
    if (n < 0 && errno == EINTR) continue;
    LOOM_CHECK(n > 0, "FileStore: cannot write ", path_, ": ", std::strerror(errno));
    written += static_cast<size_t>(n);
  }
  offset_ += record.size();
  if (op == kDeleteRecord) {
    data_.erase(key);
  } else {
    data_[key] = *value;
  }
}

void FileStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(*this, /*exclusive=*/true);
  read_tail();
  append(kSetRecord, key, &value);
}

bool FileStore::has_all(const std::vector<std::string>& keys) const {
  for (const auto& key : keys) {
    if (data_.find(key) == data_.end()) return false;
  }
  return true;
}

Bytes FileStore::get(const std::string& key) {
  const auto deadline = deadline_after(timeout_);
  milliseconds pause{1};
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      FileLock lock(*this, /*exclusive=*/false);
      read_tail();
      auto it = data_.find(key);
      if (it != data_.end()) return it->second;
    }
    LOOM_CHECK(Clock::now() < deadline, "FileStore::get: timed out after ", timeout_.count(),
               " ms waiting for key '", key, "' (file ", path_, ")");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(10));
  }
}

int64_t FileStore::add_locked(const std::string& key, int64_t delta) {
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end()) {
    const std::string text = to_string(it->second);
    errno = 0;
    char* end = nullptr;
    value = std::strtoll(text.c_str(), &end, 10);
    LOOM_CHECK(!text.empty() && errno == 0 && end == text.c_str() + text.size(),
               "FileStore::add: key '", key, "' holds '", text.substr(0, 64),
               "', not an integer");
  }
  value += delta;
  const Bytes bytes = to_bytes(std::to_string(value));
  append(kSetRecord, key, &bytes);
  return value;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(*this, /*exclusive=*/true);
  read_tail();
  return add_locked(key, delta);
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(*this, /*exclusive=*/true);
  read_tail();
  auto it = data_.find(key);
  if ((it == data_.end() && expected.empty()) || (it != data_.end() && it->second == expected)) {
    append(kSetRecord, key, &desired);
    return desired;
  }
  return it == data_.end() ? expected : it->second;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(*this, /*exclusive=*/false);
  read_tail();
  return has_all(keys);
}

void FileStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  const auto deadline = deadline_after(timeout);
  milliseconds pause{1};
  while (!check(keys)) {
    LOOM_CHECK(Clock::now() < deadline, "FileStore::wait: timed out after ", timeout.count(),
               " ms waiting for keys ", join_keys(keys), " (file ", path_, ")");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(10));
  }
}

bool FileStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(*this, /*exclusive=*/true);
  read_tail();
  if (data_.find(key) == data_.end()) return false;
  append(kDeleteRecord, key, nullptr);
  return true;
}

int64_t FileStore::num_keys() {
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(*this, /*exclusive=*/false);
  read_tail();
  int64_t count = 0;
  for (const auto& entry : data_) count += is_internal(entry.first) ? 0 : 1;
  return count;
}

}  // namespace distributed
}  // namespace loom
