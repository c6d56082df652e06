// TCPStoreProtocol: the message codes and the encoder/decoder TCPStore's
// client and server share.  The wire format itself is described at the top
// of TCPStoreServer.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace tcpstore {

// Request codes (first byte of a request body).
enum class Op : uint8_t {
  kSet = 1,         // key, value                -> kOk
  kGet = 2,         // key, timeout_ms           -> kOk value | kTimedOut
  kAdd = 3,         // key, delta                -> kOk new_value | kError message
  kCompareSet = 4,  // key, expected, desired    -> kOk value_after
  kCheck = 5,       // count, keys...            -> kOk u8 (1 = all set)
  kWait = 6,        // count, keys..., timeout_ms-> kOk | kTimedOut
  kDeleteKey = 7,   // key                       -> kOk u8 (1 = existed)
  kNumKeys = 8,     //                           -> kOk i64
};

// Reply codes (first byte of a reply body).
enum class Status : uint8_t {
  kOk = 0,
  kTimedOut = 1,
  kError = 2,  // followed by a message string
};

// Largest body either side accepts; a peer announcing more is dropped.
constexpr uint32_t kMaxBodyBytes = 1u << 30;

// Builds one length-prefixed message.
class Writer {
 public:
  Writer() : buffer_(4, '\0') {}
  Writer& u8(uint8_t value) {
    buffer_.push_back(static_cast<char>(value));
    return *this;
  }
  Writer& u32(uint32_t value) {
    for (int i = 0; i < 4; ++i) buffer_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return *this;
  }
  Writer& i64(int64_t value) {
    const uint64_t bits = static_cast<uint64_t>(value);
    for (int i = 0; i < 8; ++i) buffer_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    return *this;
  }
  Writer& bytes(const void* data, size_t n) {
    LOOM_CHECK(n <= kMaxBodyBytes, "TCPStore: a key or value of ", n,
               " bytes is larger than the store's limit of ", kMaxBodyBytes, " bytes");
    u32(static_cast<uint32_t>(n));
    buffer_.append(static_cast<const char*>(data), n);
    return *this;
  }
  Writer& str(const std::string& text) { return bytes(text.data(), text.size()); }

  // The finished message: u32 body length, then the body.
  std::string finish() {
    const size_t body = buffer_.size() - 4;
    LOOM_CHECK(body <= kMaxBodyBytes, "TCPStore: a message of ", body,
               " bytes is larger than the store's limit of ", kMaxBodyBytes, " bytes");
    for (int i = 0; i < 4; ++i) buffer_[i] = static_cast<char>((body >> (8 * i)) & 0xff);
    return std::move(buffer_);
  }

 private:
  std::string buffer_;
};

// Reads the fields of one message body; throws loom::Error when it is short.
class Reader {
 public:
  Reader(const char* data, size_t n) : data_(data), size_(n) {}
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint32_t u32() {
    need(4);
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= uint32_t(uint8_t(data_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return value;
  }
  int64_t i64() {
    need(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= uint64_t(uint8_t(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return static_cast<int64_t>(bits);
  }
  std::string str() {
    const uint32_t n = u32();
    need(n);
    std::string out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n) const {
    LOOM_CHECK(size_ - pos_ >= n, "TCPStore: malformed message (", size_, " bytes, needed ",
               pos_ + n, ")");
  }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Reads the little-endian u32 length prefix at p.
inline uint32_t read_length(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t(uint8_t(p[i])) << (8 * i);
  return value;
}

}  // namespace tcpstore
}  // namespace distributed
}  // namespace loom
