// Emulated errors, devices and memory.
//
// LOOM_CUDA_EMU_GUARD=1: each cudaMalloc gets its own pages with an
// inaccessible page on either side, the block ending where the page after
// it begins (up to its 512-byte rounding), so a kernel that reads or writes
// past a block faults at once; the fault is reported with the launch's
// file:line, block and thread.  With LOOM_CUDA_NO_CACHING=1 (every tensor its
// own cudaMalloc) that covers each tensor's bounds: compute-sanitizer's
// memcheck, roughly, on any machine.
//
// Devices: LOOM_CUDA_EMU_DEVICES of them (default 1), each an "H100-like"
// sm_90 part with 132 SMs and LOOM_CUDA_EMU_MEMORY_MB of memory (default
// 8192): cudaMalloc fails with cudaErrorMemoryAllocation past it, so
// out-of-memory paths can be tested.  Device memory is host memory (512-byte
// aligned), filled with 0xFF bytes when allocated -- NaN in every
// floating-point type -- so a kernel that reads memory nobody wrote shows
// it.  Copies that touch pageable host memory are synchronous, as CUDA's
// are in effect; copies between device and pinned memory are queued on the
// stream.  cudaFree waits for every stream of its device first, as CUDA's
// does.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include "Fibers.h"
#include "State.h"
#include "loom_emu/Stream.h"

namespace loom_emu {
namespace {

enum class Kind { kDevice, kPinned, kRegistered };

struct Allocation {
  size_t bytes;
  int device;
  Kind kind;
  void* map_base = nullptr;  // guard mode: the mapping holding the block
  size_t map_bytes = 0;
};

bool guard_mode() {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_CUDA_EMU_GUARD");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

struct sigaction g_previous_segv, g_previous_bus;

// Names the kernel thread that faulted, then puts the previous handler back:
// the faulting access repeats under it (by default: the process ends).
void on_fault(int sig, siginfo_t* info, void*) {
  char where[256];
  if (describe_running_thread(where, sizeof(where))) {
    char message[400];
    const int n = std::snprintf(message, sizeof(message),
                                "CUDA emulator: invalid memory access at %p in %s\n",
                                info->si_addr, where);
    if (n > 0) (void)!write(2, message, static_cast<size_t>(n));
  }
  sigaction(sig, sig == SIGSEGV ? &g_previous_segv : &g_previous_bus, nullptr);
}

void install_fault_report() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

// Guard mode: [page][pages holding the block, its end at the last page's
// end][page], the outer two inaccessible.  Returns the block; nullptr when
// the mapping fails.
void* map_guarded(size_t bytes, Allocation* a) {
  const size_t page = 4096;
  const size_t rounded = (bytes + 511) / 512 * 512;
  const size_t body = (rounded + page - 1) / page * page;
  void* base = mmap(nullptr, body + 2 * page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  char* b = static_cast<char*>(base);
  mprotect(b, page, PROT_NONE);
  mprotect(b + page + body, page, PROT_NONE);
  a->map_base = base;
  a->map_bytes = body + 2 * page;
  return b + page + body - rounded;
}

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> blocks;  // by start address
  std::vector<size_t> used = std::vector<size_t>(device_count(), 0);  // bytes, per device
};

Memory& memory() {
  static Memory* m = new Memory();
  return *m;
}

struct Errors {
  std::mutex mutex;
  std::vector<cudaError_t> sticky = std::vector<cudaError_t>(device_count(), cudaSuccess);
};

Errors& errors() {
  static Errors* e = new Errors();
  return *e;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

size_t env_number(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return static_cast<size_t>(std::strtoull(v, nullptr, 10));
}

size_t memory_per_device() {
  static const size_t bytes = env_number("LOOM_CUDA_EMU_MEMORY_MB", 8192) << 20;
  return bytes;
}

// The allocation containing p, if any (memory() locked by the caller).
const Allocation* find_locked(const void* p, uintptr_t* start) {
  Memory& m = memory();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = m.blocks.upper_bound(a);
  if (it == m.blocks.begin()) return nullptr;
  --it;
  if (a >= it->first + it->second.bytes && !(it->second.bytes == 0 && a == it->first))
    return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

bool is_pageable(const void* p) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  return find_locked(p, nullptr) == nullptr;
}

}  // namespace

int device_count() {
  static const int n = static_cast<int>(env_number("LOOM_CUDA_EMU_DEVICES", 1));
  return n;
}

int current_device() { return t_device; }

bool valid_device(int device) { return device >= 0 && device < device_count(); }

void set_last_error(cudaError_t error) { t_last_error = error; }

cudaError_t fail(cudaError_t error) {
  t_last_error = error;
  return error;
}

cudaError_t sticky_error(int device) {
  std::lock_guard<std::mutex> lock(errors().mutex);
  const auto& s = errors().sticky;
  return device >= 0 && static_cast<size_t>(device) < s.size() ? s[device] : cudaSuccess;
}

cudaError_t sticky_status(int device) {
  const cudaError_t sticky = sticky_error(device);
  return sticky == cudaSuccess ? cudaSuccess : fail(sticky);
}

void set_sticky_error(int device, cudaError_t error, const std::string& why) {
  std::fprintf(stderr, "CUDA emulator: device %d: %s\n", device, why.c_str());
  std::lock_guard<std::mutex> lock(errors().mutex);
  cudaError_t& sticky = errors().sticky[device];
  if (sticky == cudaSuccess) sticky = error;
}

}  // namespace loom_emu

using namespace loom_emu;

cudaError_t cudaGetLastError() {
  cudaError_t e = t_last_error;
  t_last_error = sticky_error(t_device);  // a sticky error cannot be cleared
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
  }
  return "unknown error";
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) { return cudaDriverGetVersion(version); }

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "loom CUDA emulator (H100-like)");
  prop->totalGlobalMem = memory_per_device();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize() {
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  drain_device(t_device);
  return sticky_status(t_device);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(memory().mutex);
  *total = memory_per_device();
  *free = *total - memory().used[t_device];
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  *ptr = nullptr;
  if (const cudaError_t e = sticky_status(t_device)) return e;
  if (bytes == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    auto& used = memory().used;
    if (used[t_device] + bytes > memory_per_device()) return fail(cudaErrorMemoryAllocation);
    used[t_device] += bytes;
  }
  void* p = nullptr;
  Allocation a{bytes, t_device, Kind::kDevice};
  if (guard_mode()) {
    install_fault_report();
    p = map_guarded(bytes, &a);
  } else if (posix_memalign(&p, 512, bytes) != 0) {
    p = nullptr;
  }
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(memory().mutex);
    memory().used[t_device] -= bytes;
    return fail(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xFF, bytes);
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().blocks[reinterpret_cast<uintptr_t>(p)] = a;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    auto it = memory().blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == memory().blocks.end() || it->second.kind != Kind::kDevice)
      return fail(cudaErrorInvalidValue);
    a = it->second;
  }
  drain_device(a.device);  // work still queued may use the memory
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().blocks.erase(reinterpret_cast<uintptr_t>(ptr));
  memory().used[a.device] -= a.bytes;
  if (a.map_base != nullptr)
    munmap(a.map_base, a.map_bytes);
  else
    std::free(ptr);
  return sticky_status(a.device);  // freed all the same
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0) return fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(memory().mutex);
  memory().blocks[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, -1, Kind::kPinned};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(memory().mutex);
    auto it = memory().blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == memory().blocks.end() || it->second.kind != Kind::kPinned)
      return fail(cudaErrorInvalidValue);
    memory().blocks.erase(it);
  }
  for (int d = 0; d < device_count(); ++d) drain_device(d);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned int) {
  if (ptr == nullptr || bytes == 0) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(memory().mutex);
  if (find_locked(ptr, nullptr) != nullptr) return fail(cudaErrorInvalidValue);
  memory().blocks[reinterpret_cast<uintptr_t>(ptr)] = Allocation{bytes, -1, Kind::kRegistered};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  std::lock_guard<std::mutex> lock(memory().mutex);
  auto it = memory().blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == memory().blocks.end() || it->second.kind != Kind::kRegistered)
    return fail(cudaErrorInvalidValue);
  memory().blocks.erase(it);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return fail(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof(*attributes));
  std::lock_guard<std::mutex> lock(memory().mutex);
  const Allocation* a = find_locked(ptr, nullptr);
  if (a == nullptr) {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    return cudaSuccess;
  }
  attributes->type = a->kind == Kind::kDevice ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
  attributes->device = a->kind == Kind::kDevice ? a->device : t_device;
  attributes->devicePointer = const_cast<void*>(ptr);
  attributes->hostPointer = a->kind == Kind::kDevice ? nullptr : const_cast<void*>(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* s = resolve(stream);
  if (const cudaError_t e = sticky_status(s->device)) return e;
  if (is_pageable(dst) || is_pageable(src)) {
    if (const cudaError_t e = refuse_if_capturing(s)) return e;
    drain(s);
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  }
  enqueue(s, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (e != cudaSuccess) return e;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* s = resolve(stream);
  if (const cudaError_t e = sticky_status(s->device)) return e;
  enqueue(s, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
