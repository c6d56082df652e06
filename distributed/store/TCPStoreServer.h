// TCPStoreServer: the key-value server a TCPStore master runs on a thread.
//
// One thread, one poll() loop over a wake-up eventfd, the listening socket and
// every client connection; all sockets are non-blocking and the data lives in
// a std::map only that thread touches, so no locks are needed.  A client that
// disconnects (or sends garbage) is dropped; the server carries on.  get and
// wait do not poll: the request is parked as the client's "waiter" and
// answered the moment a set/add/compare_set supplies the last missing key, or
// with kTimedOut when the timeout the client sent runs out.
//
// Wire protocol (all integers little-endian):
//
//   message  := u32 body_length, body          (body_length <= 1 GiB)
//   string   := u32 length, bytes               (keys and values; any bytes)
//   request  := u8 op, fields
//   reply    := u8 status, fields               (0 ok, 1 timed out, 2 error + string)
//
//   op               request fields                 ok reply fields
//   1 set            key, value                     -
//   2 get            key, i64 timeout_ms            value
//   3 add            key, i64 delta                 i64 new value   (2: not an integer)
//   4 compare_set    key, expected, desired         value after the call
//   5 check          u32 n, n keys                  u8 all set
//   6 wait           u32 n, n keys, i64 timeout_ms  -
//   7 delete_key     key                            u8 existed
//   8 num_keys       -                              i64 count
//
// A client sends one request and reads its reply before the next, so replies
// need no ids; TCPStore opens more connections for concurrent callers.
// Counters are stored as decimal text, as in torch.distributed.  Keys that
// start with "__loom_tcpstore/" are the store's own (the worker count) and
// are left out of num_keys.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/store/Socket.h"

namespace loom {
namespace distributed {

class TCPStoreServer {
 public:
  // Starts listening on every interface at port (0 picks a free port) and
  // starts the server thread.  Throws loom::Error naming the port when it
  // cannot listen (e.g. address already in use).
  explicit TCPStoreServer(int port);

  // Wakes the loop, joins the thread and closes every connection; clients
  // then see the connection closed.
  ~TCPStoreServer();

  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  // The port it listens on (the chosen one when constructed with 0).
  int port() const { return port_; }

  // Prefix of the keys the store keeps for itself (not counted by num_keys).
  static constexpr const char* kInternalPrefix = "__loom_tcpstore/";

 private:
  struct Client;

  void run();
  void accept_clients();
  // Reads what the client sent and handles complete requests; false = drop it.
  bool read_from(Client& client);
  // Handles the complete requests buffered for client (stops at a parked one).
  bool handle_requests(Client& client);
  bool handle(Client& client, const char* body, size_t n);
  // Answers parked get/wait requests whose keys are now all set.
  void answer_waiters();
  // Answers parked requests whose timeout has passed with kTimedOut.
  void expire_waiters();
  // Milliseconds until the earliest parked request times out (-1: none).
  int next_deadline_ms() const;
  void reply(Client& client, std::string message);
  // Sends what it can of client's pending output; false = drop it.
  bool flush(Client& client);
  bool has_all(const std::vector<std::string>& keys) const;

  net::Socket listener_;
  net::Socket wake_;  // eventfd; the destructor writes to it
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Client>> clients_;
  std::map<std::string, std::string> data_;
  int64_t num_internal_keys_ = 0;
  std::thread thread_;
};

}  // namespace distributed
}  // namespace loom
