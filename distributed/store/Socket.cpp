#include "distributed/store/Socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace net {

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  // ~100 days is "forever" for a store, and keeps time_point arithmetic safe.
  constexpr std::chrono::milliseconds kMax{100LL * 24 * 3600 * 1000};
  if (timeout < std::chrono::milliseconds(0)) timeout = std::chrono::milliseconds(0);
  if (timeout > kMax) timeout = kMax;
  return Clock::now() + timeout;
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  // Round up so that poll() does not return just before the deadline and spin.
  return left.count() >= 1000000000 ? 1000000000 : static_cast<int>(left.count()) + 1;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

// Connects fd to addr, waiting at most until deadline.  Returns 0 or an errno.
int connect_one(int fd, const sockaddr* addr, socklen_t len, Clock::time_point deadline) {
  if (::connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  while (true) {
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, ms_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return errno;
    if (ready == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t err_len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) return errno;
    return err;
  }
}

}  // namespace

Socket try_connect(const std::string& host, int port, Clock::time_point deadline,
                   std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    *error = std::string("cannot resolve host: ") + gai_strerror(rc);
    return Socket();
  }
  Socket result;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      *error = std::strerror(errno);
      continue;
    }
    const int err = connect_one(s.fd(), a->ai_addr, a->ai_addrlen, deadline);
    if (err != 0) {
      *error = std::strerror(err);
      continue;
    }
    const int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    result = std::move(s);
    break;
  }
  freeaddrinfo(found);
  return result;
}

Socket listen_on(int port) {
  LOOM_CHECK(port >= 0 && port <= 65535, "TCPStore: port must be in [0, 65535], got ", port);
  const int one = 1;
  // Prefer one dual-stack IPv6 socket (reaches IPv4 clients too); fall back to
  // IPv4 where the kernel has no IPv6.
  Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int bind_rc = -1;
  if (s.valid()) {
    const int zero = 0;
    setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    bind_rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    const int err = errno;
    if (bind_rc != 0 && err != EAFNOSUPPORT && err != EADDRNOTAVAIL) {
      LOOM_FAIL("TCPStore: cannot listen on port ", port, ": ", std::strerror(err),
                err == EADDRINUSE ? " (is another store or job using this port?)" : "");
    }
  }
  if (bind_rc != 0) {
    s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    LOOM_CHECK(s.valid(), "TCPStore: cannot create a socket: ", std::strerror(errno));
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      const int err = errno;
      LOOM_FAIL("TCPStore: cannot listen on port ", port, ": ", std::strerror(err),
                err == EADDRINUSE ? " (is another store or job using this port?)" : "");
    }
  }
  LOOM_CHECK(::listen(s.fd(), SOMAXCONN) == 0, "TCPStore: cannot listen on port ", port, ": ",
             std::strerror(errno));
  return s;
}

int local_port(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  LOOM_CHECK(getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) == 0,
             "TCPStore: getsockname failed: ", std::strerror(errno));
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

namespace {

IoResult wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, ms_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return {IoStatus::kError, errno};
    if (ready == 0) return {IoStatus::kTimedOut, 0};
    return {IoStatus::kOk, 0};  // readable, writable, or an error the next call reports
  }
}

bool is_closed_errno(int err) { return err == ECONNRESET || err == EPIPE || err == ENOTCONN; }

}  // namespace

IoResult send_all(const Socket& socket, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t sent = ::send(socket.fd(), p, n, MSG_NOSIGNAL);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const IoResult r = wait_ready(socket.fd(), POLLOUT, deadline);
      if (r.status != IoStatus::kOk) return r;
      continue;
    }
    if (sent < 0 && is_closed_errno(errno)) return {IoStatus::kClosed, errno};
    return {IoStatus::kError, errno};
  }
  return {};
}

IoResult recv_all(const Socket& socket, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::recv(socket.fd(), p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return {IoStatus::kClosed, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const IoResult r = wait_ready(socket.fd(), POLLIN, deadline);
      if (r.status != IoStatus::kOk) return r;
      continue;
    }
    if (is_closed_errno(errno)) return {IoStatus::kClosed, errno};
    return {IoStatus::kError, errno};
  }
  return {};
}

}  // namespace net
}  // namespace distributed
}  // namespace loom
