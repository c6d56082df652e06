#include "tensor/ThreadName.h"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace loom {

void set_current_thread_name(const std::string& name) {
#if defined(__linux__)
  // The kernel's limit is 16 bytes with the terminating zero.
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#else
  (void)name;
#endif
}

void set_thread_name(std::thread& thread, const std::string& name) {
#if defined(__linux__)
  pthread_setname_np(thread.native_handle(), name.substr(0, 15).c_str());
#else
  (void)thread;
  (void)name;
#endif
}

std::string current_thread_name() {
#if defined(__linux__)
  char name[16] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) == 0) return name;
#endif
  return "";
}

}  // namespace loom
