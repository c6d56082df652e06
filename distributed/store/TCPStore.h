// TCPStore: a Store served over TCP by the master rank, like
// torch.distributed.TCPStore.
//
// The master (options.is_master) runs a TCPStoreServer on a background thread
// and connects to it as a client like everyone else.  Clients keep a small
// pool of connections: each call takes an idle one (or opens another), sends
// one request and waits for its reply, so a get() blocked in one thread never
// holds up a set() from another.  Blocking calls wait on the server, which
// answers when the keys arrive, never by polling it.  Every wait is bounded:
// connecting retries until options.timeout; a server that goes away turns
// into a prompt loom::Error ("the store at host:port closed the connection")
// rather than a hang.  Protocol: see TCPStoreServer.h.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/store/Socket.h"
#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

class TCPStoreServer;

struct TCPStoreOptions {
  // Number of processes that will open the store, the master included; > 0
  // makes every instance register itself (an add on an internal key) so the
  // master can wait for the others.
  int world_size = -1;
  // Whether this process runs the server.
  bool is_master = false;
  // Connect timeout and the default timeout of get/wait (Store::timeout()).
  std::chrono::milliseconds timeout = Store::kDefaultTimeout;
  // With is_master and world_size > 0: the constructor returns only once
  // world_size instances have connected.
  bool wait_for_workers = false;
};

class TCPStore : public Store {
 public:
  // Master: listens on port (0 picks a free one, see port()) on every
  // interface, then connects to host:port.  Others: connect to host:port,
  // retrying until options.timeout.  host is a name or numeric address.
  // Throws loom::Error naming host and port when it cannot listen or connect,
  // or when the master's wait_for_workers times out (saying how many joined).
  TCPStore(std::string host, int port, TCPStoreOptions options = {});
  // Closes this instance's connections; the master also stops its server,
  // after which other clients' calls fail promptly.
  ~TCPStore() override;

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

  const std::string& host() const { return host_; }
  // The server's port (the chosen one when the master was given port 0).
  int port() const { return port_; }
  bool is_master() const { return server_ != nullptr; }

 private:
  // Sends one request and returns the reply body (status byte first).
  // reply_timeout bounds the wait for the reply.  Throws loom::Error naming
  // the store's address when the connection fails.
  std::string request(const std::string& message, std::chrono::milliseconds reply_timeout);
  // Like request(), but a kOk reply is required (kError's message is thrown).
  std::string request_ok(const char* what, const std::string& message);
  net::Socket connect_with_retry(std::chrono::milliseconds timeout);
  void wait_for_workers(int world_size);
  std::string address() const;

  std::string host_;
  int port_ = 0;
  std::unique_ptr<TCPStoreServer> server_;
  std::mutex pool_mutex_;
  std::vector<net::Socket> idle_;  // connected sockets no call is using
};

}  // namespace distributed
}  // namespace loom
