// PrefixStore: a namespace inside another store.
//
// Every key k becomes "prefix/k" in the wrapped store, so several process
// groups (or several uses of one store) can share a store without their keys
// colliding.  It starts with the wrapped store's timeout(); get() and the
// timeout-less wait() honour this store's own timeout() (set_timeout on the
// PrefixStore does not change the wrapped store's).
#pragma once

#include <memory>
#include <string>

#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

class PrefixStore : public Store {
 public:
  // Throws loom::Error when store is null.
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  // The wrapped store's count: all its keys, not only this prefix's.
  int64_t num_keys() override;

  const std::string& prefix() const { return prefix_; }
  // The wrapped store.
  const std::shared_ptr<Store>& underlying_store() const { return store_; }

 private:
  std::string prefixed(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace distributed
}  // namespace loom
