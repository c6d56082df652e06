#include "tensor/ThreadName.h"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace loom {

#if defined(__linux__)
namespace {
// The kernel keeps 16 bytes with the terminating zero.
void name_thread(pthread_t thread, const std::string& name) {
  pthread_setname_np(thread, name.substr(0, 15).c_str());
}
}  // namespace
#endif

void set_current_thread_name(const std::string& name) {
#if defined(__linux__)
  name_thread(pthread_self(), name);
#else
  (void)name;
#endif
}

void set_thread_name(std::thread& thread, const std::string& name) {
#if defined(__linux__)
  name_thread(thread.native_handle(), name);
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
