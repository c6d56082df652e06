#include "distributed/store/PrefixStore.h"

#include "tensor/Error.h"

namespace loom {
namespace distributed {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  LOOM_CHECK(store_ != nullptr, "PrefixStore: the wrapped store is null (prefix '", prefix_, "')");
  timeout_ = store_->timeout();
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(prefixed(key));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  store_->set(prefixed(key), value);
}

Bytes PrefixStore::get(const std::string& key) {
  // The wrapped get() waits with the wrapped store's timeout; when ours
  // differs, wait with ours first.
  if (timeout_ != store_->timeout()) store_->wait({prefixed(key)}, timeout_);
  return store_->get(prefixed(key));
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return store_->add(prefixed(key), delta);
}

Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return store_->compare_set(prefixed(key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return store_->check(prefixed(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(prefixed(keys), timeout);
}

bool PrefixStore::delete_key(const std::string& key) { return store_->delete_key(prefixed(key)); }

int64_t PrefixStore::num_keys() { return store_->num_keys(); }

}  // namespace distributed
}  // namespace loom
