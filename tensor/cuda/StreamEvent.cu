// CUDA streams and events (see StreamEvent.h).
//
// cudaEventRecord needs the event and the stream on one device, so events
// are created under a DeviceGuard of the device whose stream records them;
// cudaStreamWaitEvent, cudaEventQuery/Synchronize/ElapsedTime/Destroy accept
// an event of any device.
#include "tensor/cuda/Launch.cuh"
#include "tensor/cuda/StreamEvent.h"

#include <cuda_runtime.h>

#include "tensor/CudaRuntime.h"
#include "tensor/cuda/Check.h"

namespace loom {
namespace cuda {
namespace {

cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// "Not ready" is an answer, not an error: clears it and says false.
bool ready(cudaError_t status) {
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  LOOM_CUDA_CHECK(status);
  return true;
}

__global__ void spin_kernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void stream_priority_range(int device, int* least, int* greatest) {
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(least, greatest));
}

uint64_t stream_create(int device, int priority) {
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  LOOM_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority));
  return reinterpret_cast<uint64_t>(stream);
}

bool stream_query(int device, uint64_t stream) {
  DeviceGuard guard(device);  // the legacy stream (0) is the current device's
  return ready(cudaStreamQuery(as_stream(stream)));
}

void stream_wait_event(int device, uint64_t stream, void* event) {
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0));
}

void* event_create(int device, bool timing) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  LOOM_CUDA_CHECK(
      cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return event;
}

void event_destroy(void* event) noexcept {
  if (event == nullptr) return;
  if (cudaEventDestroy(as_event(event)) != cudaSuccess) cudaGetLastError();
}

void event_record(void* event, int device, uint64_t stream) {
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaEventRecord(as_event(event), as_stream(stream)));
}

bool event_query(void* event) { return ready(cudaEventQuery(as_event(event))); }

void event_synchronize(void* event) { LOOM_CUDA_CHECK(cudaEventSynchronize(as_event(event))); }

double event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start), as_event(end)));
  return ms;
}

void sleep_cycles(int64_t cycles, int device, uint64_t stream) {
  DeviceGuard guard(device);
  spin_kernel<<<1, 1, 0, as_stream(stream)>>>(cycles);
  LOOM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace loom
