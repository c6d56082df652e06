#include "distributed/gloo/GlooStore.h"

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

GlooStore::GlooStore(std::shared_ptr<distributed::Store> store, std::string prefix)
    : store_(std::move(store)), prefix_(std::move(prefix)) {
  LOOM_CHECK(store_ != nullptr, "GlooStore: the store is null");
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->set(full(key), Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const Bytes value = store_->get(full(key));
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, store_->timeout()); }

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const auto& key : keys) full_keys.push_back(full(key));
  // gloo passes its "no timeout" (0) or a negative value for "unset": fall back
  // to the store's own timeout so nothing waits forever.
  store_->wait(full_keys, timeout.count() > 0 ? timeout : store_->timeout());
}

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
