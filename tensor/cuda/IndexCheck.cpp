// The CUDA kernel of native::check_index_values: index and target values
// checked on the device, the verdict brought home without the host waiting
// (tensor/DeferredChecks.h).
//
// The check kernel writes (first bad position, its value) into two int64 of
// device memory on the current stream; an asynchronous copy moves them to
// pinned host memory, and an event recorded after the copy says when they
// have arrived.  The device scratch is freed at once (later work on the
// stream runs after the copy); the pinned block and the event live until the
// verdict has been read.
#include <memory>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/DeferredChecks.h"
#include "tensor/Factory.h"
#include "tensor/cuda/Copy.h"
#include "tensor/cuda/Graph.h"
#include "tensor/cuda/Index.h"
#include "tensor/cuda/StreamEvent.h"
#include "tensor/native/Index.h"

namespace loom {
namespace cuda {

namespace {

// A verdict on its way to the host.
class VerdictInFlight {
 public:
  explicit VerdictInFlight(int device)
      : host_(pinned_allocator().allocate(2 * sizeof(int64_t), Device(kCPU))),
        event_(event_create(device, false)) {}
  ~VerdictInFlight() {
    bool arrived = false;
    try {
      arrived = event_query(event_);
    } catch (...) {
    }
    event_destroy(event_);
    // A copy still in flight would land in whoever gets the block next: keep
    // it (a few bytes, only when a check is dropped before its verdict).
    if (arrived && host_.deleter) host_.deleter(host_.data);
  }
  VerdictInFlight(const VerdictInFlight&) = delete;
  VerdictInFlight& operator=(const VerdictInFlight&) = delete;

  void* host() const { return host_.data; }
  void* event() const { return event_; }
  // After arrival: the first bad position (-1: none) and its value.
  int64_t position() const { return static_cast<const int64_t*>(host_.data)[0]; }
  int64_t value() const { return static_cast<const int64_t*>(host_.data)[1]; }

 private:
  DataPtr host_;
  void* event_;
};

}  // namespace

void check_index_values_kernel(const Tensor& idx, int64_t limit, bool has_ignore, int64_t ignore,
                               const std::function<std::string(int64_t)>& message) {
  if (idx.numel() == 0) return;
  const int device = idx.device().index;
  const uint64_t stream = current_stream_handle(device);
  // Inside a graph capture a verdict could not be read (its copy and event
  // would be replayed, not run); the kernels skip bad values (CudaGraph.h).
  if (stream_is_capturing(device, stream)) return;
  raise_deferred_errors();  // an earlier op's failure comes first
  const Tensor verdict = empty({2}, TensorOptions(kInt64).device(idx.device()));
  find_bad_index(static_cast<const int64_t*>(idx.data_ptr()), idx.numel(), limit, has_ignore,
                 ignore, static_cast<int64_t*>(verdict.data_ptr()), device, stream);
  auto v = std::make_shared<VerdictInFlight>(device);
  memcpy_async(v->host(), verdict.data_ptr(), 2 * sizeof(int64_t), device, stream);
  event_record(v->event(), device, stream);
  if (sync_checks()) {
    event_synchronize(v->event());
    if (v->position() >= 0) throw Error(message(v->value()));
    return;
  }
  const std::string where = idx.device().str();
  defer_check({[v] { return event_query(v->event()); },
               [v] { event_synchronize(v->event()); },
               [v, message, where]() -> std::string {
                 if (v->position() < 0) return "";
                 return message(v->value()) + " (found by a check that ran on " + where +
                        " after the op was queued; LOOM_CUDA_SYNC_CHECKS=1 raises it from the op)";
               }});
}

static const native::RegisterKernel reg_check_index_values(native::check_index_values_stub, kCUDA,
                                                           &check_index_values_kernel);

}  // namespace cuda
}  // namespace loom
