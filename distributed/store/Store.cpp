#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

constexpr std::chrono::milliseconds Store::kDefaultTimeout;

Bytes to_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

std::string to_string(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace distributed
}  // namespace loom
