#include "distributed/store/TCPStore.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "distributed/store/TCPStoreProtocol.h"
#include "distributed/store/TCPStoreServer.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {

using tcpstore::Op;
using tcpstore::Status;
using std::chrono::milliseconds;

namespace {

// How long past a get/wait's own timeout the client waits for the server's
// "timed out" reply before it calls the connection dead.
constexpr milliseconds kReplyGrace{2000};
// Connecting again after a first connection worked: the server is known to be
// up, so a refusal means it has gone; do not retry for the full timeout.
constexpr milliseconds kReconnectBudget{1000};
// Connections kept open for reuse; more are closed when their call ends.
constexpr size_t kMaxIdleConnections = 16;

// A get/wait's timeout plus kReplyGrace, without overflowing for huge ones.
milliseconds with_grace(milliseconds timeout) {
  return std::min(timeout, milliseconds(1LL << 40)) + kReplyGrace;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + ("'" + key + "'");
  return out;
}

std::string workers_key() { return std::string(TCPStoreServer::kInternalPrefix) + "workers"; }
std::string all_joined_key() {
  return std::string(TCPStoreServer::kInternalPrefix) + "all_workers_joined";
}

Status status_of(const std::string& reply) { return static_cast<Status>(uint8_t(reply[0])); }

}  // namespace

TCPStore::TCPStore(std::string host, int port, TCPStoreOptions options) : host_(std::move(host)) {
  LOOM_CHECK(!host_.empty(), "TCPStore: host must not be empty");
  LOOM_CHECK(port >= 0 && port <= 65535, "TCPStore: port must be in [0, 65535], got ", port);
  LOOM_CHECK(options.is_master || port > 0,
             "TCPStore: a client needs the master's port, got port 0 (only the master may pick "
             "a free port)");
  LOOM_CHECK(options.timeout.count() > 0, "TCPStore: timeout must be positive, got ",
             options.timeout.count(), " ms");
  timeout_ = options.timeout;
  port_ = port;
  if (options.is_master) {
    server_ = std::make_unique<TCPStoreServer>(port);
    port_ = server_->port();
  }
  idle_.push_back(connect_with_retry(options.timeout));
  if (options.world_size > 0) {
    if (add(workers_key(), 1) == options.world_size) set(all_joined_key(), Bytes{'1'});
    if (options.is_master && options.wait_for_workers) wait_for_workers(options.world_size);
  }
}

TCPStore::~TCPStore() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    idle_.clear();
  }
  server_.reset();
}

std::string TCPStore::address() const { return host_ + ":" + std::to_string(port_); }

net::Socket TCPStore::connect_with_retry(milliseconds timeout) {
  const auto deadline = net::deadline_after(timeout);
  milliseconds backoff{10};
  std::string error = "timed out";
  while (true) {
    net::Socket socket = net::try_connect(host_, port_, deadline, &error);
    if (socket.valid()) return socket;
    const auto left = deadline - net::Clock::now();
    if (left <= net::Clock::duration::zero()) break;
    std::this_thread::sleep_for(std::min<net::Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, milliseconds(200));
  }
  LOOM_FAIL("TCPStore: could not connect to ", address(), " within ", timeout.count(),
            " ms (last error: ", error, ")");
}

std::string TCPStore::request(const std::string& message, milliseconds reply_timeout) {
  net::Socket socket;
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!idle_.empty()) {
      socket = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!socket.valid()) socket = connect_with_retry(std::min(timeout_, kReconnectBudget));

  const auto deadline = net::deadline_after(reply_timeout);
  auto fail = [&](const net::IoResult& r, const char* doing) {
    switch (r.status) {
      case net::IoStatus::kClosed:
        LOOM_FAIL("TCPStore: the store at ", address(),
                  " closed the connection (did the master process exit?)");
      case net::IoStatus::kTimedOut:
        LOOM_FAIL("TCPStore: no reply from the store at ", address(), " within ",
                  reply_timeout.count(), " ms while ", doing);
      default:
        LOOM_FAIL("TCPStore: connection to the store at ", address(), " failed while ", doing, ": ",
                  std::strerror(r.error));
    }
  };
  // On any failure the socket is dropped (closed), never returned to the pool.
  net::IoResult r = net::send_all(socket, message.data(), message.size(), deadline);
  if (r.status != net::IoStatus::kOk) fail(r, "sending a request");
  char header[4];
  r = net::recv_all(socket, header, sizeof(header), deadline);
  if (r.status != net::IoStatus::kOk) fail(r, "waiting for a reply");
  const uint32_t n = tcpstore::read_length(header);
  LOOM_CHECK(n >= 1 && n <= tcpstore::kMaxBodyBytes, "TCPStore: malformed reply of ", n,
             " bytes from the store at ", address());
  std::string body(n, '\0');
  r = net::recv_all(socket, &body[0], n, deadline);
  if (r.status != net::IoStatus::kOk) fail(r, "reading a reply");
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(socket));
  }
  return body;
}

std::string TCPStore::request_ok(const char* what, const std::string& message) {
  std::string reply = request(message, timeout_);
  if (status_of(reply) == Status::kError) {
    tcpstore::Reader in(reply.data() + 1, reply.size() - 1);
    LOOM_FAIL("TCPStore::", what, ": ", in.str(), " (store at ", address(), ")");
  }
  LOOM_CHECK(status_of(reply) == Status::kOk, "TCPStore::", what,
             ": unexpected reply from the store at ", address());
  return reply;
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  request_ok("set", tcpstore::Writer()
                        .u8(uint8_t(Op::kSet))
                        .str(key)
                        .bytes(value.data(), value.size())
                        .finish());
}

Bytes TCPStore::get(const std::string& key) {
  const std::string reply = request(
      tcpstore::Writer().u8(uint8_t(Op::kGet)).str(key).i64(timeout_.count()).finish(),
      with_grace(timeout_));
  LOOM_CHECK(status_of(reply) != Status::kTimedOut, "TCPStore::get: timed out after ",
             timeout_.count(), " ms waiting for key '", key, "' (store at ", address(), ")");
  LOOM_CHECK(status_of(reply) == Status::kOk, "TCPStore::get: unexpected reply from the store at ",
             address());
  tcpstore::Reader in(reply.data() + 1, reply.size() - 1);
  const std::string value = in.str();
  return Bytes(value.begin(), value.end());
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  const std::string reply =
      request_ok("add", tcpstore::Writer().u8(uint8_t(Op::kAdd)).str(key).i64(delta).finish());
  return tcpstore::Reader(reply.data() + 1, reply.size() - 1).i64();
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const std::string reply = request_ok("compare_set", tcpstore::Writer()
                                                          .u8(uint8_t(Op::kCompareSet))
                                                          .str(key)
                                                          .bytes(expected.data(), expected.size())
                                                          .bytes(desired.data(), desired.size())
                                                          .finish());
  const std::string value = tcpstore::Reader(reply.data() + 1, reply.size() - 1).str();
  return Bytes(value.begin(), value.end());
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  tcpstore::Writer out;
  out.u8(uint8_t(Op::kCheck)).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) out.str(key);
  const std::string reply = request_ok("check", out.finish());
  return tcpstore::Reader(reply.data() + 1, reply.size() - 1).u8() != 0;
}

void TCPStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  tcpstore::Writer out;
  out.u8(uint8_t(Op::kWait)).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) out.str(key);
  out.i64(timeout.count());
  const std::string reply = request(out.finish(), with_grace(timeout));
  LOOM_CHECK(status_of(reply) != Status::kTimedOut, "TCPStore::wait: timed out after ",
             timeout.count(), " ms waiting for keys ", join_keys(keys), " (store at ", address(),
             ")");
  LOOM_CHECK(status_of(reply) == Status::kOk, "TCPStore::wait: unexpected reply from the store at ",
             address());
}

bool TCPStore::delete_key(const std::string& key) {
  const std::string reply =
      request_ok("delete_key", tcpstore::Writer().u8(uint8_t(Op::kDeleteKey)).str(key).finish());
  return tcpstore::Reader(reply.data() + 1, reply.size() - 1).u8() != 0;
}

int64_t TCPStore::num_keys() {
  const std::string reply =
      request_ok("num_keys", tcpstore::Writer().u8(uint8_t(Op::kNumKeys)).finish());
  return tcpstore::Reader(reply.data() + 1, reply.size() - 1).i64();
}

void TCPStore::wait_for_workers(int world_size) {
  try {
    wait({all_joined_key()}, timeout_);
  } catch (const Error&) {
    const int64_t joined = add(workers_key(), 0);
    LOOM_FAIL("TCPStore: only ", joined, " of ", world_size, " workers joined the store at ",
              address(), " within ", timeout_.count(), " ms");
  }
}

}  // namespace distributed
}  // namespace loom
