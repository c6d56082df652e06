#include "distributed/store/HashStore.h"

#include <string>

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace {

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + ("'" + key + "'");
  return out;
}

}  // namespace

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    data_[key] = value;
  }
  changed_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::lock_guard<std::mutex> lock(mutex_);
  return data_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    if (it != data_.end()) {
      const std::string text = to_string(it->second);
      try {
        value = std::stoll(text);
      } catch (const std::exception&) {
        LOOM_FAIL("HashStore::add: key '", key, "' holds '", text, "', not an integer");
      }
    }
    value += delta;
    data_[key] = to_bytes(std::to_string(value));
  }
  changed_.notify_all();
  return value;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    if ((it == data_.end() && expected.empty()) || (it != data_.end() && it->second == expected)) {
      data_[key] = desired;
      result = desired;
    } else {
      result = it == data_.end() ? expected : it->second;
    }
  }
  changed_.notify_all();
  return result;
}

bool HashStore::has_all(const std::vector<std::string>& keys) const {
  for (const auto& key : keys) {
    if (data_.find(key) == data_.end()) return false;
  }
  return true;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return has_all(keys);
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool ok = changed_.wait_for(lock, timeout, [&] { return has_all(keys); });
  LOOM_CHECK(ok, "HashStore: timed out after ", timeout.count(), " ms waiting for keys ",
             join_keys(keys));
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(data_.size());
}

}  // namespace distributed
}  // namespace loom
