#include "tensor/CudaGraph.h"

#include <optional>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"
#include "tensor/Stream.h"
#include "tensor/cuda/Graph.h"

namespace loom {
namespace cuda {

struct Graph::State {
  int device = -1;
  std::optional<Stream> stream;  // the capture stream, from the first capture_begin
  std::unique_ptr<StreamGuard> guard;                    // while capturing
  bool capturing = false;
  bool pool_kept = false;
  bool allocator_capturing = false;  // begin_allocator_capture without its end
  void* exec = nullptr;
  Event last_replay;  // recorded after the latest replay on its stream

  // Ends the allocators' capture state (once).
  void end_allocator_capture_once() {
    if (!allocator_capturing) return;
    allocator_capturing = false;
    end_allocator_capture(device);
  }

  // Gives back what capture_begin took: the thread's stream, the
  // allocators' capture state and the pool.
  void release() {
    guard.reset();
    end_allocator_capture_once();
    if (pool_kept) {
      // Later work on the capture stream (its next user) runs after the last
      // replay, so reusing the pool's blocks is ordered after it.
      if (!last_replay.query()) stream->wait_event(last_replay);
      release_stream_pool(device, stream->native_handle());
      pool_kept = false;
    }
    capturing = false;
  }
};

Graph::Graph() : state_(std::make_unique<State>()) {}

Graph::~Graph() {
  try {
    reset();
  } catch (...) {
    // A destructor must not throw; the device may be gone at exit.
  }
}

void Graph::capture_begin(int device, GraphOptions options) {
  State& s = *state_;
  LOOM_CHECK(!s.capturing, "cuda::Graph::capture_begin: already capturing; call capture_end()");
  LOOM_CHECK(s.exec == nullptr,
             "cuda::Graph::capture_begin: this graph holds a capture already; call reset() first");
  if (device < 0) device = current_device();
  check_device(device, "cuda::Graph::capture_begin");
  const Device d(kCUDA, device);
  s.device = device;
  s.stream = Stream::create(d);
  s.stream->wait_event(current_stream(d).record());  // after the work queued so far
  keep_stream_pool(device, s.stream->native_handle());
  s.pool_kept = true;
  s.guard = std::make_unique<StreamGuard>(*s.stream);
  begin_allocator_capture(device);
  s.allocator_capturing = true;
  try {
    graph_capture_begin(device, s.stream->native_handle(), options.relaxed);
  } catch (...) {
    s.release();
    throw;
  }
  s.capturing = true;
}

void Graph::capture_end() {
  State& s = *state_;
  LOOM_CHECK(s.capturing, "cuda::Graph::capture_end: not capturing (call capture_begin first)");
  try {
    s.exec = graph_capture_end(s.device, s.stream->native_handle());
  } catch (const Error& e) {
    s.release();
    LOOM_FAIL("cuda::Graph::capture_end: the capture on cuda:", s.device, " failed: ", e.what(),
              " (was there a wait for the device, e.g. item() or a copy to the host, or work "
              "from another stream joined into it?)");
  }
  s.guard.reset();
  s.end_allocator_capture_once();
  s.capturing = false;
}

void Graph::replay() {
  State& s = *state_;
  LOOM_CHECK(!s.capturing, "cuda::Graph::replay: the graph is still being captured");
  LOOM_CHECK(s.exec != nullptr, "cuda::Graph::replay: nothing captured (capture_begin/end first)");
  const Stream current = current_stream(Device(kCUDA, s.device));
  graph_launch(s.exec, s.device, current.native_handle());
  s.last_replay = current.record();
}

void Graph::reset() {
  State& s = *state_;
  if (s.capturing) {
    // Abandon the capture: end it and drop what CUDA captured.
    try {
      graph_exec_destroy(graph_capture_end(s.device, s.stream->native_handle()));
    } catch (const Error&) {
      // An invalidated capture has nothing to free.
    }
  }
  graph_exec_destroy(s.exec);
  s.exec = nullptr;
  s.release();
}

bool Graph::is_capturing() const { return state_->capturing; }
bool Graph::is_captured() const { return state_->exec != nullptr; }
int Graph::device() const { return state_->device; }

bool is_current_stream_capturing(int device) {
  if (device < 0 || !is_available()) return false;
  return stream_is_capturing(device, current_stream_handle(device));
}

void check_not_capturing(int device, const char* what, const char* why) {
  LOOM_CHECK(!is_current_stream_capturing(device), what,
             " cannot run while a cuda::Graph is being captured on cuda:", device, ": ", why);
}

}  // namespace cuda
}  // namespace loom
