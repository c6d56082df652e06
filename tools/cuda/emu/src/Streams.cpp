// Emulated streams, events, kernel launches and graph capture.
//
// Every stream (and each device's legacy stream 0) is a host thread running
// its queue in order, so work on two streams overlaps as on a GPU and a host
// that reads a result before synchronising can see it unfinished.  The
// legacy stream does not synchronise with other streams (loom creates its
// streams non-blocking).  While a stream is captured, work queued on it is
// recorded into the graph instead; a graph launch queues the recorded work
// as one item.  Event records made during a capture are not part of the
// graph (loom's allocator makes none then).
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <utility>

#include "Fibers.h"
#include "State.h"
#include "loom_emu/Stream.h"

namespace loom_emu {
namespace {

struct Streams {
  std::mutex mutex;
  std::vector<CUstream_st*> all;            // never freed: destroyed streams stop their thread
  std::vector<CUstream_st*> legacy =  // per device, made on first use
      std::vector<CUstream_st*>(device_count(), nullptr);
  std::vector<CUstream_st*> capturing;      // streams in a capture now
};

Streams& streams() {
  static Streams* s = new Streams();  // outlives every static destructor
  return *s;
}

thread_local cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

void run_queue(CUstream_st* s) {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->changed.wait(lock, [&] { return !s->queue.empty() || s->stopping; });
      if (s->queue.empty()) return;
      work = std::move(s->queue.front());
      s->queue.pop_front();
    }
    if (sticky_error(s->device) == cudaSuccess) {
      try {
        work();
      } catch (const std::exception& e) {
        set_sticky_error(s->device, cudaErrorLaunchFailure, e.what());
      } catch (...) {
        set_sticky_error(s->device, cudaErrorLaunchFailure, "unknown exception");
      }
    }
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      ++s->completed;
    }
    s->changed.notify_all();
  }
}

CUstream_st* make_stream(int device, unsigned flags, int priority) {
  auto* s = new CUstream_st();
  s->device = device;
  s->flags = flags;
  s->priority = priority;
  std::thread(run_queue, s).detach();
  std::lock_guard<std::mutex> lock(streams().mutex);
  streams().all.push_back(s);
  return s;
}

// Queues `work` on s, or records it while s is captured.
void push(CUstream_st* s, std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->graph != nullptr) {
      s->graph->work.push_back(std::move(work));
      return;
    }
    s->queue.push_back(std::move(work));
    ++s->enqueued;
  }
  s->changed.notify_all();
}

// Where the event's last record was queued: its stream (nullptr: never
// recorded) and its place in that stream's count.
std::pair<CUstream_st*, uint64_t> last_record(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  return {event->stream, event->target};
}

// Waits on stream `s` until its completed count reaches `target`.
void wait_for(CUstream_st* s, uint64_t target) {
  std::unique_lock<std::mutex> lock(s->mutex);
  s->changed.wait(lock, [&] { return s->completed >= target; });
}

}  // namespace

double now_ms() {
  using namespace std::chrono;
  static const steady_clock::time_point start = steady_clock::now();
  return duration<double, std::milli>(steady_clock::now() - start).count();
}

long long device_clock() {
  return static_cast<long long>(now_ms() * 1e6);  // ~1 GHz
}

CUstream_st* resolve(cudaStream_t stream) {
  if (stream != nullptr) return stream;
  const int device = current_device();
  {
    std::lock_guard<std::mutex> lock(streams().mutex);
    CUstream_st* legacy = streams().legacy[device];
    if (legacy != nullptr) return legacy;
  }
  CUstream_st* s = make_stream(device, cudaStreamDefault, 0);
  std::lock_guard<std::mutex> lock(streams().mutex);
  if (streams().legacy[device] == nullptr) streams().legacy[device] = s;
  return streams().legacy[device];
}

void drain(CUstream_st* s) {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    target = s->enqueued;
  }
  wait_for(s, target);
}

void drain_device(int device) {
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lock(streams().mutex);
    all = streams().all;
  }
  for (CUstream_st* s : all)
    if (s->device == device) drain(s);
}

bool is_capturing(CUstream_st* s) {
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->graph != nullptr;
}

cudaError_t check_unsafe_call() {
  if (t_capture_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  std::lock_guard<std::mutex> lock(streams().mutex);
  bool forbidden = false;
  const std::thread::id me = std::this_thread::get_id();
  for (CUstream_st* s : streams().capturing) {
    std::lock_guard<std::mutex> slock(s->mutex);
    const bool mine = s->capture_thread == me && s->capture_mode != cudaStreamCaptureModeRelaxed;
    const bool global_elsewhere = t_capture_mode == cudaStreamCaptureModeGlobal &&
                                  s->capture_mode == cudaStreamCaptureModeGlobal;
    if (mine || global_elsewhere) {
      s->capture_invalidated = true;
      forbidden = true;
    }
  }
  return forbidden ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

cudaError_t refuse_if_capturing(CUstream_st* s) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->graph == nullptr) return cudaSuccess;
  s->capture_invalidated = true;
  return fail(cudaErrorStreamCaptureUnsupported);
}

void enqueue(cudaStream_t stream, std::function<void()> work) {
  push(resolve(stream), std::move(work));
}

int stream_device(cudaStream_t stream) { return resolve(stream)->device; }

void launch_body(const Config& c, std::function<void()> body) {
  const uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  const bool valid = c.grid.x >= 1 && c.grid.y >= 1 && c.grid.z >= 1 && c.grid.x <= 2147483647u &&
                     c.grid.y <= 65535 && c.grid.z <= 65535 && threads >= 1 && threads <= 1024 &&
                     c.block.x <= 1024 && c.block.y <= 1024 && c.block.z <= 64 &&
                     c.shared <= 48 * 1024;
  if (!valid) {
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  CUstream_st* s = resolve(c.stream);
  if (sticky_status(s->device) != cudaSuccess) return;  // the thread's last error now
  const dim3 grid = c.grid, block = c.block;
  const char* file = c.file;
  const int line = c.line;
  push(s, [grid, block, body = std::move(body), file, line] {
    run_grid(grid, block, body, file, line);
  });
}

}  // namespace loom_emu

using namespace loom_emu;

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue);
  *stream = make_stream(current_device(), flags, priority);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->stopping = true;  // its thread finishes the queue, then ends
  }
  stream->changed.notify_all();
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  if (const cudaError_t e = refuse_if_capturing(s)) return e;
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  drain(s);
  return sticky_status(s->device);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  if (const cudaError_t e = refuse_if_capturing(s)) return e;
  if (const cudaError_t e = sticky_status(s->device)) return e;
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->completed >= s->enqueued ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = resolve(stream)->device;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  const std::pair<CUstream_st*, uint64_t> record = last_record(event);
  CUstream_st* const source = record.first;
  const uint64_t target = record.second;
  CUstream_st* s = resolve(stream);
  if (const cudaError_t e = sticky_status(s->device)) return e;
  if (source == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
  push(s, [source, target] { wait_for(source, target); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue);
  auto* e = new CUevent_st();
  e->device = current_device();
  e->flags = flags;
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete event;  // a record still queued holds only its time_ms
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  CUstream_st* s = resolve(stream);
  if (s->device != event->device) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = sticky_status(s->device)) return e;
  if (is_capturing(s)) return cudaSuccess;  // see the file comment
  std::lock_guard<std::mutex> elock(event->mutex);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    auto time = std::make_shared<double>(0);
    s->queue.push_back([time] { *time = now_ms(); });
    event->time_ms = time;
    event->target = ++s->enqueued;
  }
  event->stream = s;
  s->changed.notify_all();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  const auto [s, target] = last_record(event);
  if (s == nullptr) return cudaSuccess;
  if (const cudaError_t e = sticky_status(s->device)) return e;
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->completed >= target ? cudaSuccess : fail(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (check_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  const auto [s, target] = last_record(event);
  if (s == nullptr) return cudaSuccess;
  wait_for(s, target);
  return sticky_status(s->device);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return fail(cudaErrorInvalidValue);
  if ((start->flags & cudaEventDisableTiming) || (end->flags & cudaEventDisableTiming))
    return fail(cudaErrorInvalidResourceHandle);
  for (cudaEvent_t e : {start, end}) {
    std::lock_guard<std::mutex> lock(e->mutex);
    if (e->stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> slock(e->stream->mutex);
    if (e->stream->completed < e->target) return fail(cudaErrorNotReady);
  }
  std::lock_guard<std::mutex> a(start->mutex);
  std::lock_guard<std::mutex> b(end->mutex);
  *ms = static_cast<float>(*end->time_ms - *start->time_ms);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported);  // legacy stream
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    if (stream->graph != nullptr) return fail(cudaErrorInvalidValue);  // already capturing
    stream->graph = new CUgraph_st();
    stream->capture_mode = mode;
    stream->capture_thread = std::this_thread::get_id();
    stream->capture_invalidated = false;
  }
  std::lock_guard<std::mutex> lock(streams().mutex);
  streams().capturing.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  CUgraph_st* g;
  bool invalidated;
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    g = stream->graph;
    invalidated = stream->capture_invalidated;
    stream->graph = nullptr;
  }
  if (g == nullptr) return fail(cudaErrorInvalidValue);  // not capturing
  {
    std::lock_guard<std::mutex> lock(streams().mutex);
    auto& c = streams().capturing;
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] == stream) {
        c.erase(c.begin() + static_cast<long>(i));
        break;
      }
  }
  if (invalidated) {
    delete g;
    *graph = nullptr;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* s = resolve(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  *status = s->graph == nullptr ? cudaStreamCaptureStatusNone
            : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return fail(cudaErrorInvalidValue);
  std::swap(*mode, t_capture_mode);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  auto* e = new CUgraphExec_st();
  e->work = graph->work;
  *exec = e;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* s = resolve(stream);
  if (const cudaError_t e = sticky_status(s->device)) return e;
  auto work = std::make_shared<std::vector<std::function<void()>>>(exec->work);
  push(s, [work] {
    for (auto& w : *work) w();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
