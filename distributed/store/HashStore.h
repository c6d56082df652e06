// HashStore: a Store inside one process, for ranks that are threads.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

class HashStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

 private:
  bool has_all(const std::vector<std::string>& keys) const;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
};

}  // namespace distributed
}  // namespace loom
