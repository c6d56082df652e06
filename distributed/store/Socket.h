// Socket: the few POSIX TCP calls TCPStore needs, each bounded by a deadline.
//
// TCPStore must never hang on a dead peer, so nothing here blocks without a
// deadline: sockets are non-blocking and every send/receive/connect waits in
// poll() for at most the time left.  Failures come back as values (IoResult,
// an invalid Socket plus an error text) so the caller can name the store's
// address in the loom::Error it throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace loom {
namespace distributed {
namespace net {

using Clock = std::chrono::steady_clock;

// now + timeout, saturating instead of overflowing for huge timeouts.
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

// Milliseconds from now until deadline, at least 0, for poll().
int ms_until(Clock::time_point deadline);

// Owns one file descriptor (closed on destruction); move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// Resolves host (a name or a numeric IPv4/IPv6 address) with getaddrinfo and
// tries each address once, waiting for each connect at most until deadline.
// Returns a connected non-blocking socket (TCP_NODELAY set), or an invalid one
// with *error describing the last failure ("Connection refused", ...).
Socket try_connect(const std::string& host, int port, Clock::time_point deadline,
                   std::string* error);

// A non-blocking listening socket on every interface (IPv6 dual-stack where
// the kernel has IPv6, else IPv4) at port, 0 picking a free port.  Sets
// SO_REUSEADDR.  Throws loom::Error naming the port when it cannot listen
// (e.g. the address is already in use).
Socket listen_on(int port);

// The local port a socket is bound to.
int local_port(const Socket& socket);

enum class IoStatus {
  kOk,
  kClosed,    // the peer closed the connection (EOF, ECONNRESET, EPIPE)
  kTimedOut,  // the deadline passed first
  kError,     // another errno, in IoResult::error
};

struct IoResult {
  IoStatus status = IoStatus::kOk;
  int error = 0;  // errno for kError
};

// Sends all n bytes of data (never raises SIGPIPE).
IoResult send_all(const Socket& socket, const void* data, size_t n, Clock::time_point deadline);

// Receives exactly n bytes into data.
IoResult recv_all(const Socket& socket, void* data, size_t n, Clock::time_point deadline);

}  // namespace net
}  // namespace distributed
}  // namespace loom
