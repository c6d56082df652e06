// The emulated devices' shared state: errors, devices, streams, capture.
// Internal to tools/cuda/emu/src.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct CUgraph_st {
  std::vector<std::function<void()>> work;
};

struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};

// A stream: a host thread that runs its queue in order.  `enqueued` counts
// the work ever queued, `completed` the work finished, so "everything queued
// before now is done" is completed >= the enqueued count read now.
struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  bool stopping = false;
  // Graph capture (cudaStreamBeginCapture .. cudaStreamEndCapture).
  CUgraph_st* graph = nullptr;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  bool capture_invalidated = false;
};

struct CUevent_st {
  int device = 0;
  unsigned flags = 0;
  std::mutex mutex;
  CUstream_st* stream = nullptr;  // where the last record was queued (nullptr: never recorded)
  uint64_t target = 0;            // that record's place in the stream's count
  // When that record ran, on the emulator's clock; shared with the queued
  // record, so the event can be destroyed before the record runs.
  std::shared_ptr<double> time_ms;
};

namespace loom_emu {

int device_count();
int current_device();
bool valid_device(int device);

// The calling thread's last error (cudaGetLastError) and a device's sticky
// one (set when queued work fails; every later call on the device returns it).
void set_last_error(cudaError_t error);
cudaError_t fail(cudaError_t error);  // set_last_error(error), then return it
cudaError_t sticky_error(int device);
// sticky_error(device), also made the calling thread's last error when set.
cudaError_t sticky_status(int device);
void set_sticky_error(int device, cudaError_t error, const std::string& why);

// The stream a handle names (0: the current device's legacy stream).
CUstream_st* resolve(cudaStream_t stream);
void drain(CUstream_st* s);          // waits until everything queued on s has run
void drain_device(int device);       // drain() on every stream of the device
double now_ms();

// Graph capture rules (CUDA's "potentially unsafe API calls").  Returns
// cudaSuccess, or cudaErrorStreamCaptureUnsupported after invalidating the
// captures the call would break.
cudaError_t check_unsafe_call();
bool is_capturing(CUstream_st* s);
// For a call a capture cannot record: when s is being captured, invalidates
// the capture and fails with cudaErrorStreamCaptureUnsupported; else cudaSuccess.
cudaError_t refuse_if_capturing(CUstream_st* s);

}  // namespace loom_emu
