#include "distributed/launch/LinePrefixer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loom {
namespace distributed {

LinePrefixer::LinePrefixer(std::string prefix, int out_fd, size_t max_line)
    : prefix_(std::move(prefix)), fd_(out_fd), max_line_(max_line < 1 ? 1 : max_line) {}

void LinePrefixer::write_line(const char* data, size_t size) {
  std::string line;
  line.reserve(prefix_.size() + size + 1);
  line.append(prefix_).append(data, size).push_back('\n');
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone (EPIPE, closed): drop the line
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void LinePrefixer::feed(const char* data, size_t size) {
  while (size > 0) {
    const void* nl = std::memchr(data, '\n', size);
    if (nl == nullptr) {
      pending_.append(data, size);
      while (pending_.size() >= max_line_) {
        write_line(pending_.data(), max_line_);
        pending_.erase(0, max_line_);
      }
      return;
    }
    const size_t len = static_cast<const char*>(nl) - data;
    if (pending_.empty()) {
      write_line(data, len);
    } else {
      pending_.append(data, len);
      write_line(pending_.data(), pending_.size());
      pending_.clear();
    }
    data += len + 1;
    size -= len + 1;
  }
}

void LinePrefixer::flush() {
  if (pending_.empty()) return;
  write_line(pending_.data(), pending_.size());
  pending_.clear();
}

}  // namespace distributed
}  // namespace loom
