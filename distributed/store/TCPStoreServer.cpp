#include "distributed/store/TCPStoreServer.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "distributed/store/TCPStoreProtocol.h"
#include "tensor/Error.h"
#include "tensor/ThreadName.h"

namespace loom {
namespace distributed {

using tcpstore::Op;
using tcpstore::Status;

namespace {

bool is_internal(const std::string& key) {
  return key.compare(0, std::strlen(TCPStoreServer::kInternalPrefix),
                     TCPStoreServer::kInternalPrefix) == 0;
}

std::string ok_reply() { return tcpstore::Writer().u8(uint8_t(Status::kOk)).finish(); }

std::string error_reply(const std::string& message) {
  return tcpstore::Writer().u8(uint8_t(Status::kError)).str(message).finish();
}

// Parses a whole decimal int64; false for anything else.
bool parse_int64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *out = value;
  return true;
}

// A parked get or wait request.
struct ParkedRequest {
  bool is_get = false;
  std::vector<std::string> keys;
  net::Clock::time_point deadline;
};

}  // namespace

struct TCPStoreServer::Client {
  net::Socket socket;
  std::string in;       // bytes received, not yet handled
  std::string out;      // bytes to send
  size_t out_sent = 0;  // of out, already sent
  std::unique_ptr<ParkedRequest> waiter;
  bool dead = false;
};

TCPStoreServer::TCPStoreServer(int port) {
  listener_ = net::listen_on(port);
  port_ = net::local_port(listener_);
  wake_ = net::Socket(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  LOOM_CHECK(wake_.valid(), "TCPStore: eventfd failed: ", std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  stop_ = true;
  const uint64_t one = 1;
  while (::write(wake_.fd(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  // clients_ and listener_ close their sockets as they are destroyed.
}

void TCPStoreServer::run() {
  set_current_thread_name("loom-tcpstore");
  std::vector<pollfd> fds;
  while (!stop_) {
    expire_waiters();
    answer_waiters();
    for (size_t i = 0; i < clients_.size();) {
      if (clients_[i]->dead) {
        clients_.erase(clients_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    fds.clear();
    fds.push_back({wake_.fd(), POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& client : clients_) {
      short events = POLLIN;
      if (client->out_sent < client->out.size()) events |= POLLOUT;
      fds.push_back({client->socket.fd(), events, 0});
    }
    const int ready = ::poll(fds.data(), fds.size(), next_deadline_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;  // nothing sensible left to do; the destructor still joins
    }
    if (fds[0].revents != 0) {
      uint64_t count = 0;
      while (::read(wake_.fd(), &count, sizeof(count)) > 0) {
      }
      if (stop_) break;
    }
    // fds[2 + i] belongs to clients_[i]: accept only after walking them.
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      Client& client = *clients_[i];
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      if (revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
        if (!read_from(client)) client.dead = true;
      }
      if (!client.dead && (revents & POLLOUT)) {
        if (!flush(client)) client.dead = true;
      }
    }
    if (fds[1].revents & POLLIN) accept_clients();
  }
}

void TCPStoreServer::accept_clients() {
  while (true) {
    const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: try again on the next wake-up
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto client = std::make_unique<Client>();
    client->socket = net::Socket(fd);
    clients_.push_back(std::move(client));
  }
}

bool TCPStoreServer::read_from(Client& client) {
  char chunk[65536];
  while (true) {
    const ssize_t got = ::recv(client.socket.fd(), chunk, sizeof(chunk), 0);
    if (got > 0) {
      client.in.append(chunk, static_cast<size_t>(got));
      if (static_cast<size_t>(got) < sizeof(chunk)) break;
      continue;
    }
    if (got == 0) return false;  // the client went away
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  return handle_requests(client);
}

bool TCPStoreServer::handle_requests(Client& client) {
  size_t pos = 0;
  bool ok = true;
  while (ok && !client.waiter && client.in.size() - pos >= 4) {
    const uint32_t n = tcpstore::read_length(client.in.data() + pos);
    if (n > tcpstore::kMaxBodyBytes) {
      ok = false;
      break;
    }
    if (client.in.size() - pos - 4 < n) break;
    ok = handle(client, client.in.data() + pos + 4, n);
    pos += 4 + n;
  }
  client.in.erase(0, pos);
  return ok;
}

bool TCPStoreServer::has_all(const std::vector<std::string>& keys) const {
  for (const auto& key : keys) {
    if (data_.find(key) == data_.end()) return false;
  }
  return true;
}

bool TCPStoreServer::handle(Client& client, const char* body, size_t n) {
  try {
    tcpstore::Reader in(body, n);
    const Op op = static_cast<Op>(in.u8());
    switch (op) {
      case Op::kSet: {
        std::string key = in.str();
        std::string value = in.str();
        if (data_.find(key) == data_.end() && is_internal(key)) ++num_internal_keys_;
        data_[std::move(key)] = std::move(value);
        reply(client, ok_reply());
        return true;
      }
      case Op::kGet:
      case Op::kWait: {
        auto waiter = std::make_unique<ParkedRequest>();
        waiter->is_get = op == Op::kGet;
        if (waiter->is_get) {
          waiter->keys.push_back(in.str());
        } else {
          const uint32_t count = in.u32();
          for (uint32_t i = 0; i < count; ++i) waiter->keys.push_back(in.str());
        }
        waiter->deadline = net::deadline_after(std::chrono::milliseconds(in.i64()));
        // Parked; answer_waiters/expire_waiters reply (at once if all keys are set).
        client.waiter = std::move(waiter);
        return true;
      }
      case Op::kAdd: {
        const std::string key = in.str();
        const int64_t delta = in.i64();
        int64_t value = 0;
        auto it = data_.find(key);
        if (it != data_.end() && !parse_int64(it->second, &value)) {
          reply(client, error_reply("add: key '" + key + "' holds '" + it->second.substr(0, 64) +
                                    "', not an integer"));
          return true;
        }
        value += delta;
        if (it == data_.end() && is_internal(key)) ++num_internal_keys_;
        data_[key] = std::to_string(value);
        reply(client, tcpstore::Writer().u8(uint8_t(Status::kOk)).i64(value).finish());
        return true;
      }
      case Op::kCompareSet: {
        const std::string key = in.str();
        const std::string expected = in.str();
        std::string desired = in.str();
        auto it = data_.find(key);
        std::string after;
        if ((it == data_.end() && expected.empty()) || (it != data_.end() && it->second == expected)) {
          if (it == data_.end() && is_internal(key)) ++num_internal_keys_;
          data_[key] = desired;
          after = std::move(desired);
        } else {
          after = it == data_.end() ? expected : it->second;
        }
        reply(client, tcpstore::Writer().u8(uint8_t(Status::kOk)).str(after).finish());
        return true;
      }
      case Op::kCheck: {
        std::vector<std::string> keys;
        const uint32_t count = in.u32();
        for (uint32_t i = 0; i < count; ++i) keys.push_back(in.str());
        reply(client, tcpstore::Writer().u8(uint8_t(Status::kOk)).u8(has_all(keys) ? 1 : 0).finish());
        return true;
      }
      case Op::kDeleteKey: {
        const std::string key = in.str();
        const bool existed = data_.erase(key) > 0;
        if (existed && is_internal(key)) --num_internal_keys_;
        reply(client, tcpstore::Writer().u8(uint8_t(Status::kOk)).u8(existed ? 1 : 0).finish());
        return true;
      }
      case Op::kNumKeys: {
        const int64_t count = static_cast<int64_t>(data_.size()) - num_internal_keys_;
        reply(client, tcpstore::Writer().u8(uint8_t(Status::kOk)).i64(count).finish());
        return true;
      }
    }
    reply(client, error_reply("unknown request code " + std::to_string(int(op))));
    return true;
  } catch (const Error&) {
    return false;  // malformed message: drop this client
  }
}

void TCPStoreServer::answer_waiters() {
  // A reply can unpark a client whose next request changes keys another
  // client waits for, so repeat until nothing moves.
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto& client_ptr : clients_) {
      Client& client = *client_ptr;
      if (client.dead || !client.waiter || !has_all(client.waiter->keys)) continue;
      tcpstore::Writer out;
      out.u8(uint8_t(Status::kOk));
      if (client.waiter->is_get) out.str(data_.at(client.waiter->keys[0]));
      client.waiter.reset();
      reply(client, out.finish());
      if (!client.dead && !handle_requests(client)) client.dead = true;
      progress = true;
    }
  }
}

void TCPStoreServer::expire_waiters() {
  const auto now = net::Clock::now();
  for (auto& client_ptr : clients_) {
    Client& client = *client_ptr;
    if (client.dead || !client.waiter || client.waiter->deadline > now) continue;
    client.waiter.reset();
    reply(client, tcpstore::Writer().u8(uint8_t(Status::kTimedOut)).finish());
    if (!client.dead && !handle_requests(client)) client.dead = true;
  }
}

int TCPStoreServer::next_deadline_ms() const {
  int timeout_ms = -1;
  for (const auto& client : clients_) {
    if (!client->waiter) continue;
    const int ms = net::ms_until(client->waiter->deadline);
    if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
  }
  return timeout_ms;
}

void TCPStoreServer::reply(Client& client, std::string message) {
  if (client.out_sent == client.out.size()) {
    client.out = std::move(message);
    client.out_sent = 0;
  } else {
    client.out.append(message);
  }
  if (!flush(client)) client.dead = true;
}

bool TCPStoreServer::flush(Client& client) {
  while (client.out_sent < client.out.size()) {
    const ssize_t sent = ::send(client.socket.fd(), client.out.data() + client.out_sent,
                                client.out.size() - client.out_sent, MSG_NOSIGNAL);
    if (sent > 0) {
      client.out_sent += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  client.out.clear();
  client.out_sent = 0;
  return true;
}

}  // namespace distributed
}  // namespace loom
