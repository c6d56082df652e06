// loom::Error and LOOM_CHECK: the one way loom reports bad input.
//
// Every public entry point checks its arguments and throws loom::Error with a
// message a user can act on: what was wrong, which argument, expected vs got.
// Nothing in loom aborts on bad input.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace loom {

// The exception loom throws for every user-facing error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {

inline void append_all(std::ostringstream&) {}

template <typename T, typename... Rest>
void append_all(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  append_all(out, rest...);
}

// Concatenates its arguments with operator<<.
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  append_all(out, args...);
  return out.str();
}

}  // namespace detail
}  // namespace loom

// Throws loom::Error(message) when cond is false.  The message is built from
// the remaining arguments with operator<< only when the check fails.
#define LOOM_CHECK(cond, ...)                                        \
  do {                                                               \
    if (!(cond)) throw ::loom::Error(::loom::detail::str(__VA_ARGS__)); \
  } while (0)

// Throws loom::Error unconditionally.
#define LOOM_FAIL(...) throw ::loom::Error(::loom::detail::str(__VA_ARGS__))
