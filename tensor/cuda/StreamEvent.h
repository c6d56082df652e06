// CUDA stream and event primitives on opaque handles, for tensor/Stream.cpp
// (loom's Stream/Event over cudaStream_t/cudaEvent_t) and the copy contract
// of tensor/cuda/Copy.cpp.  Plain C++ declarations; defined in
// StreamEvent.cu.  Without CUDA they are stubs that throw loom::Error
// (tensor/CudaRuntime.cpp).
//
// Streams are cudaStream_t cast to uint64_t, 0 meaning the legacy default
// stream of `device`; events are cudaEvent_t passed as void*.  Every call
// checks its CUDA status and throws loom::Error on failure; the caller has
// checked the device index.
#pragma once

#include <cstdint>

namespace loom {
namespace cuda {

// The priorities streams of `device` may have: `greatest` is the most urgent
// and numerically lowest (e.g. least 0, greatest -5 on recent GPUs).
void stream_priority_range(int device, int* least, int* greatest);
// A new non-blocking stream (it does not synchronise with the legacy default
// stream) on `device` with `priority` (within the range above).
uint64_t stream_create(int device, int priority);
// True when all work queued on the stream has finished.
bool stream_query(int device, uint64_t stream);
// Work queued on `stream` (of `device`) after this call waits for `event`
// (which may belong to another device).
void stream_wait_event(int device, uint64_t stream, void* event);

// A new event on `device`; `timing` keeps timestamps for event_elapsed_ms.
void* event_create(int device, bool timing);
// Destroys an event (also one still pending: CUDA frees it once it
// completes).  Never throws: errors (e.g. at process exit) are ignored.
void event_destroy(void* event) noexcept;
// Records `event` (created on `device`) on `stream` of the same device.
void event_record(void* event, int device, uint64_t stream);
// True when the work the event captured has finished.
bool event_query(void* event);
// Blocks the calling thread until the event has completed.
void event_synchronize(void* event);
// Milliseconds between two completed timing events.
double event_elapsed_ms(void* start, void* end);

// Queues a kernel that spins for about `cycles` GPU clock cycles on `stream`
// (a stand-in for long work in tests, like torch.cuda._sleep).
void sleep_cycles(int64_t cycles, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
