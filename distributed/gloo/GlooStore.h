// GlooStore: lets gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh)
// run over any loom Store (HashStore, TCPStore, FileStore, PrefixStore).
//
// Every key gloo writes is put under `prefix`, so several gloo contexts (one
// per worker thread of a ProcessGroupGloo, or several groups) can meet through
// one store without clashing.  Blocking calls wait up to the loom store's
// timeout (or the one gloo passes) and throw loom::Error naming the keys.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "distributed/store/Store.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

class GlooStore : public ::gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<distributed::Store> store, std::string prefix);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::string full(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<distributed::Store> store_;
  std::string prefix_;
};

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
