// LinePrefixer: copies a worker's output to loomrun's, a whole line at a
// time, each line starting with the worker's prefix ("[rank1]: ").
//
// Bytes arrive in arbitrary pieces from a pipe; complete lines are written
// with one write() each, so lines of different workers never mix inside a
// line.  A line longer than max_line is cut there (written with its prefix
// as if it ended), so a worker that never prints a newline cannot make
// loomrun buffer without bound.  flush() writes a pending partial line, with
// a newline added, when the worker's pipe closes.
#pragma once

#include <cstddef>
#include <string>

namespace loom {
namespace distributed {

class LinePrefixer {
 public:
  LinePrefixer(std::string prefix, int out_fd, size_t max_line = 64 * 1024);
  // Writes every line completed by these bytes; keeps the rest.
  void feed(const char* data, size_t size);
  // Writes the pending partial line (if any) followed by '\n'.
  void flush();

 private:
  void write_line(const char* data, size_t size);

  std::string prefix_;
  int fd_;
  size_t max_line_;
  std::string pending_;
};

}  // namespace distributed
}  // namespace loom
