#include "distributed/gloo/HostStaging.h"

#include <algorithm>
#include <cstring>

#include "distributed/GatherScatter.h"
#include "tensor/CudaMemory.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

namespace {

// The start of one buffer holding the hosts back to back, or null.
char* hosts_back_to_back(const std::vector<Host>& hosts) {
  std::vector<Tensor> tensors;
  tensors.reserve(hosts.size());
  for (const auto& h : hosts) tensors.push_back(h.host);
  return back_to_back(tensors);
}

}  // namespace

void Host::write_back() const {
  if (!host.is_same(original)) native::copy_(original, host);
}

Host to_host(const Tensor& t, bool read) {
  if (t.is_cpu()) return {t, t};
  // Pinned host memory: the device copies straight into it (no bounce buffer).
  Tensor host = cuda::pinned_empty(t.sizes(), t.dtype());
  if (read) native::copy_(host, t);
  return {t, host};
}

std::vector<Host> to_host(const std::vector<Tensor>& ts, bool read) {
  std::vector<Host> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(to_host(t, read));
  return out;
}

char* pack(const std::vector<Host>& hosts, std::unique_ptr<char[]>& scratch, bool read) {
  if (char* p = hosts_back_to_back(hosts)) return p;
  size_t total = 0;
  for (const auto& h : hosts) total += h.host.nbytes();
  scratch.reset(new char[std::max<size_t>(total, 1)]);
  if (read) {
    char* at = scratch.get();
    for (const auto& h : hosts) {
      if (h.host.nbytes()) std::memcpy(at, h.ptr(), h.host.nbytes());
      at += h.host.nbytes();
    }
  }
  return scratch.get();
}

void unpack(const char* buffer, const std::vector<Host>& hosts) {
  if (buffer != hosts_back_to_back(hosts)) {
    for (const auto& h : hosts) {
      if (h.host.nbytes()) std::memcpy(h.ptr(), buffer, h.host.nbytes());
      buffer += h.host.nbytes();
    }
  }
  for (const auto& h : hosts) h.write_back();
}

char* non_null(char* p) {
  static char dummy[8];
  return p ? p : dummy;
}

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
