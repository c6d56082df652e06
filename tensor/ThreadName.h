// Names the calling thread, so `top -H`, `perf` and debuggers show which of
// loom's threads is which ("loom-gloo-0", "loom-bwd-cpu:1", ...).  Linux
// keeps the first 15 characters; elsewhere these do nothing.  A thread
// inherits its creator's name, which ThreadNameGuard uses to name threads
// that libraries start (Gloo's transport loop).
#pragma once

#include <string>
#include <thread>

namespace loom {

void set_current_thread_name(const std::string& name);
// Names another thread (already named when this returns, unlike a name the
// thread gives itself as it starts).
void set_thread_name(std::thread& thread, const std::string& name);
std::string current_thread_name();

// Renames the calling thread for its scope, restoring the old name after.
class ThreadNameGuard {
 public:
  explicit ThreadNameGuard(const std::string& name) : saved_(current_thread_name()) {
    set_current_thread_name(name);
  }
  ~ThreadNameGuard() { set_current_thread_name(saved_); }
  ThreadNameGuard(const ThreadNameGuard&) = delete;
  ThreadNameGuard& operator=(const ThreadNameGuard&) = delete;

 private:
  std::string saved_;
};

}  // namespace loom
