// Store: the key-value rendezvous every process group is built on.
//
// Ranks meet through a store: they publish addresses and ids under agreed
// keys and wait for each other's.  Implementations:
//   HashStore    in one process (threads as ranks; tests)
//   TCPStore     a server on the master rank, clients everywhere (store/TCPStore.h)
//   FileStore    a file on a shared file system (store/FileStore.h)
//   PrefixStore  namespaces another store's keys (store/PrefixStore.h)
// Values are raw bytes.  Every blocking call gives up after timeout() and
// throws loom::Error naming the keys it was waiting for.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace loom {
namespace distributed {

using Bytes = std::vector<uint8_t>;

Bytes to_bytes(const std::string& text);
std::string to_string(const Bytes& bytes);

class Store {
 public:
  // 300 s, like torch.distributed's default store timeout.
  static constexpr std::chrono::milliseconds kDefaultTimeout{300000};

  virtual ~Store() = default;

  // Sets key to value (overwrites).
  virtual void set(const std::string& key, const Bytes& value) = 0;
  void set(const std::string& key, const std::string& value) { set(key, to_bytes(value)); }

  // The value of key, waiting up to timeout() for it to be set.
  virtual Bytes get(const std::string& key) = 0;

  // Atomically adds delta to the integer stored at key (absent = 0) and
  // returns the new value.  The value is stored as decimal text, so get()
  // of a counter returns e.g. "3".
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  // Atomically: if key is absent and expected is empty, or key's value equals
  // expected, sets it to desired.  Returns the value after the call.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;

  // True when every key is set (does not wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Waits until every key is set; throws loom::Error after the timeout.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

  // Removes key; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;

  // Number of keys set.
  virtual int64_t num_keys() = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 protected:
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace distributed
}  // namespace loom
