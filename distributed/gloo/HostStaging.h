// How ProcessGroupGloo hands tensors to Gloo, which only reads and writes
// host memory: CPU tensors as they are, CUDA tensors through a host copy,
// and lists of tensors as one buffer.  Private to the gloo group.
//
// Design notes:
// * Memory.  Contiguous CPU tensors are reduced and received in place (no
//   copies).  Lists of tensors (all_gather, gather, all_to_all) go through
//   one scratch buffer unless they already lie back to back in memory
//   (pack / unpack).
// * CUDA tensors (builds with CUDA) are staged through pinned host memory:
//   the worker copies them once an event recorded on the caller's current
//   stream when the collective was issued has completed (so work queued
//   before it, on any stream, is seen; see Task::ready in GlooState.h), and
//   copies results back (write_back) before the Work completes.
#pragma once

#include <memory>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace gloo_glue {

// A CPU tensor holding t's data: t itself on the CPU; a host copy of a CUDA
// tensor (its values copied when `read`).  write_back copies a staged host
// tensor back to the device.
struct Host {
  Tensor original;
  Tensor host;
  void* ptr() const { return host.numel() ? host.data_ptr() : nullptr; }
  char* bytes() const { return static_cast<char*>(ptr()); }
  void write_back() const;
};

Host to_host(const Tensor& t, bool read);
std::vector<Host> to_host(const std::vector<Tensor>& ts, bool read);

// One buffer holding the hosts back to back: theirs when they already are,
// else `scratch`, filled with their data when `read`.
char* pack(const std::vector<Host>& hosts, std::unique_ptr<char[]>& scratch, bool read);
// Copies a back-to-back buffer out to the hosts (when it was a scratch buffer)
// and the hosts back to their devices.
void unpack(const char* buffer, const std::vector<Host>& hosts);

// Never hand gloo a null pointer, even for zero bytes.
char* non_null(char* p);

}  // namespace gloo_glue
}  // namespace distributed
}  // namespace loom
