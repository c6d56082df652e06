#include "tensor/Stream.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "tensor/CudaRuntime.h"
#include "tensor/DeferredChecks.h"
#include "tensor/Error.h"
#include "tensor/Parallel.h"
#include "tensor/ThreadName.h"
#include "tensor/cuda/Copy.h"
#include "tensor/cuda/StreamEvent.h"

namespace loom {
namespace detail {

using Clock = std::chrono::steady_clock;

struct StreamQueue;

// What an Event points at: set once by the record marker on the worker (or
// at once, for an idle CUDA stream).  For a CUDA stream `done` means the
// cudaEvent has been recorded (the host part); the GPU part is cuda_event.
struct EventState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Clock::time_point time;
  std::exception_ptr error;        // the stream's unreported error at the marker
  std::string stream_name;
  std::weak_ptr<StreamQueue> queue;  // to clear the error once reported
  // CUDA streams only:
  bool cuda = false;             // recorded on a CUDA stream
  bool timing = false;           // cuda_event keeps timestamps
  void* cuda_event = nullptr;    // cudaEvent_t, created at record()
  bool cuda_recorded = false;    // cudaEventRecord succeeded (set before done)

  ~EventState() { cuda::event_destroy(cuda_event); }

  void complete(std::exception_ptr err) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      time = Clock::now();
      error = std::move(err);
      done = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return done; });
  }
};

struct Work {
  enum Kind { kClosure, kRecord, kWait } kind = kClosure;
  std::function<void()> fn;
  std::vector<int64_t> state;  // captured StreamStateHook values
  std::shared_ptr<EventState> event;
};

// The queue a worker thread serves; shared by the handle and the thread.
struct StreamQueue {
  Device device;
  std::string name;
  uint64_t handle = 0;  // cuda: the cudaStream_t (0: legacy default stream)
  int priority = 0;
  std::mutex mutex;
  std::condition_variable work_cv;
  std::deque<Work> work;
  bool stop = false;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  std::exception_ptr error;  // first unreported error; later closures skipped
  std::weak_ptr<StreamImpl> impl;  // for current_stream() inside closures
};

void release_cuda_stream(Device device, int priority, uint64_t handle);

struct StreamImpl {
  std::shared_ptr<StreamQueue> queue;
  std::thread thread;
  bool owned = false;  // created (joined on destruction) vs process-lifetime
  pid_t pid = ::getpid();  // the process whose thread serves it

  ~StreamImpl() {
    struct ReturnHandle {  // after the join below: the worker is done with it
      StreamImpl* self;
      ~ReturnHandle() {
        if (self->owned && self->queue->device.is_cuda() && self->queue->handle != 0)
          release_cuda_stream(self->queue->device, self->queue->priority, self->queue->handle);
      }
    } return_handle{this};
    if (!owned || !thread.joinable()) return;
    if (::getpid() != pid) {
      // A forked child: the worker thread does not exist here.
      thread.detach();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(queue->mutex);
      queue->stop = true;
    }
    queue->work_cv.notify_all();
    // The last handle may be dropped by a closure running on this very stream.
    if (thread.get_id() == std::this_thread::get_id())
      thread.detach();
    else
      thread.join();
  }
};

}  // namespace detail

namespace {

using detail::EventState;
using detail::StreamImpl;
using detail::StreamQueue;
using detail::Work;

std::mutex& hooks_mutex() {
  static std::mutex m;
  return m;
}
std::vector<StreamStateHook>& hooks() {
  static auto* h = new std::vector<StreamStateHook>();  // leaked: used at exit
  return *h;
}

std::vector<int64_t> capture_state() {
  std::lock_guard<std::mutex> lock(hooks_mutex());
  std::vector<int64_t> values;
  values.reserve(hooks().size());
  for (const auto& h : hooks()) values.push_back(h.get());
  return values;
}

// Thread-count policy per CPU device.
std::mutex g_threads_mutex;
std::map<int, int> g_thread_overrides;
std::atomic<int> g_highest_cpu_index{0};

// Per thread: guards' streams, and the stream this worker serves.
thread_local std::map<Device, std::shared_ptr<StreamImpl>> t_guarded;
thread_local std::weak_ptr<StreamImpl> t_worker_impl;
thread_local Device t_worker_device;
thread_local uint64_t t_worker_handle = 0;  // the CUDA stream this worker serves
thread_local bool t_is_worker = false;

// A CUDA call's failure as the error of work on stream `name`.
std::exception_ptr stream_error(const std::string& name, const char* what) {
  return std::make_exception_ptr(
      Error(detail::str("error in work submitted to stream ", name, ": ", what)));
}

// Records e's CUDA event on q's stream.  Returns the failure, if any.
std::exception_ptr record_cuda_event(StreamQueue& q, EventState& e) {
  try {
    cuda::event_record(e.cuda_event, q.device.index, q.handle);
    e.cuda_recorded = true;
    return nullptr;
  } catch (const std::exception& ex) {
    return stream_error(q.name, ex.what());
  }
}

// Makes q's later work wait for e, whose host part is done: on the GPU for a
// CUDA stream, on this thread for a CPU one.  Returns a failure (e's own
// error, or a CUDA error), if any.
std::exception_ptr wait_done_event(StreamQueue& q, EventState& e) {
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    if (e.error) return e.error;
  }
  if (!e.cuda_recorded) return nullptr;  // a CPU event: done is complete
  try {
    if (q.device.is_cuda())
      cuda::stream_wait_event(q.device.index, q.handle, e.cuda_event);
    else
      cuda::event_synchronize(e.cuda_event);
    return nullptr;
  } catch (const std::exception& ex) {
    return stream_error(q.name, ex.what());
  }
}

void run_closure(StreamQueue& q, Work& w) {
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.error) return;  // skipped: an earlier closure failed
  }
  std::vector<StreamStateHook> hs;
  {
    std::lock_guard<std::mutex> lock(hooks_mutex());
    hs = hooks();
  }
  std::vector<int64_t> saved;
  for (size_t i = 0; i < hs.size() && i < w.state.size(); ++i) {
    saved.push_back(hs[i].get());
    hs[i].set(w.state[i]);
  }
  if (q.device.is_cpu()) {
    set_thread_num_threads(0);
    set_thread_num_threads(device_num_threads(q.device));
  }
  std::exception_ptr error;
  try {
    w.fn();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(
        Error(detail::str("error in work submitted to stream ", q.name, ": ", e.what())));
  } catch (...) {
    error = std::make_exception_ptr(
        Error(detail::str("error in work submitted to stream ", q.name, ": unknown exception")));
  }
  w.fn = nullptr;  // release captured tensors on the worker, now
  for (size_t i = 0; i < saved.size(); ++i) hs[i].set(saved[i]);
  if (error) {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (!q.error) q.error = error;
  }
}

void worker_loop(std::shared_ptr<StreamQueue> q) {
  set_current_thread_name("loom-" + q->device.str() + "-" + q->name);
  t_is_worker = true;
  t_worker_device = q->device;
  t_worker_impl = q->impl;
  t_worker_handle = q->handle;
  if (q->device.is_cuda()) {
    try {
      cuda::set_device(q->device.index);  // closures' kernels go to this GPU
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(q->mutex);
      q->error = stream_error(q->name, e.what());
    }
  }
  while (true) {
    Work w;
    {
      std::unique_lock<std::mutex> lock(q->mutex);
      q->work_cv.wait(lock, [&] { return !q->work.empty() || q->stop; });
      if (q->work.empty()) return;  // stop requested and drained
      w = std::move(q->work.front());
      q->work.pop_front();
    }
    switch (w.kind) {
      case Work::kClosure:
        run_closure(*q, w);
        break;
      case Work::kRecord: {
        std::exception_ptr failed;
        if (w.event->cuda_event != nullptr) failed = record_cuda_event(*q, *w.event);
        std::exception_ptr err;
        {
          std::lock_guard<std::mutex> lock(q->mutex);
          if (failed && !q->error) q->error = failed;
          err = q->error;
          ++q->completed;  // before the event completes: query() agrees with it
        }
        w.event->complete(err);
        continue;
      }
      case Work::kWait: {
        w.event->wait();
        const std::exception_ptr err = wait_done_event(*q, *w.event);
        if (err) {
          std::lock_guard<std::mutex> lock(q->mutex);
          if (!q->error) q->error = err;
        }
        break;
      }
    }
    w = Work();
    std::lock_guard<std::mutex> lock(q->mutex);
    ++q->completed;
  }
}

void check_device(Device device, const char* who) {
  if (device.is_cuda()) {
    cuda::check_device(device.index, who);
    return;
  }
  LOOM_CHECK(device.index >= 0, who, ": expected a device index >= 0, got ", device);
  int seen = g_highest_cpu_index.load();
  while (device.index > seen && !g_highest_cpu_index.compare_exchange_weak(seen, device.index)) {
  }
}

std::shared_ptr<StreamImpl> make_impl(Device device, std::string name, bool owned,
                                      uint64_t handle = 0, int priority = 0) {
  auto impl = std::make_shared<StreamImpl>();
  impl->queue = std::make_shared<StreamQueue>();
  impl->queue->device = device;
  impl->queue->name = std::move(name);
  impl->queue->handle = handle;
  impl->queue->priority = priority;
  impl->queue->impl = impl;
  impl->owned = owned;
  impl->thread = std::thread(worker_loop, impl->queue);
  if (!owned) impl->thread.detach();
  return impl;
}

// The default and copy streams.  Leaked on purpose: their workers live for
// the whole process and are never joined, so exit does not wait on them.  A
// forked child starts with an empty registry (its parent's workers do not
// exist in it), so it gets fresh streams on first use.  The parent's registry
// is abandoned, not freed (its mutex may be held), and stays reachable
// through `abandoned` so LeakSanitizer in a forked child does not report it.
struct ProcessStreams {
  std::mutex mutex;
  std::map<std::pair<Device, int>, std::shared_ptr<StreamImpl>> streams;
  ProcessStreams* abandoned = nullptr;
};
std::atomic<ProcessStreams*> g_process_streams{new ProcessStreams()};

void reset_process_streams_in_child() {
  auto* fresh = new ProcessStreams();
  fresh->abandoned = g_process_streams.load();
  g_process_streams.store(fresh);
}

const bool g_atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, reset_process_streams_in_child);
  return true;
}();

std::shared_ptr<StreamImpl> process_stream(Device device, int kind) {
  check_device(device, kind == 0 ? "Stream::default_stream" : "Stream::copy_stream");
  ProcessStreams& registry = *g_process_streams.load();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto& slot = registry.streams[{device, kind}];
  if (!slot) {
    // CUDA: the compute stream is the legacy default stream (0); the copy
    // stream is a non-blocking stream of its own, never destroyed.
    const uint64_t handle =
        device.is_cuda() && kind == 1 ? cuda::stream_create(device.index, 0) : 0;
    slot = make_impl(device, device.str() + (kind == 0 ? " default stream" : " copy stream"),
                     false, handle);
  }
  return slot;
}

// CUDA streams from create() are pooled per (device, priority), not
// destroyed: the caching allocator keys its pools by stream id, so an id must
// never come back as a different stream while blocks of the old one wait.
std::mutex g_cuda_pool_mutex;
auto* g_cuda_pool = new std::map<std::pair<Device, int>, std::vector<uint64_t>>();  // leaked

uint64_t acquire_cuda_stream(Device device, int priority) {
  {
    std::lock_guard<std::mutex> lock(g_cuda_pool_mutex);
    auto& free = (*g_cuda_pool)[{device, priority}];
    if (!free.empty()) {
      const uint64_t handle = free.back();
      free.pop_back();
      return handle;
    }
  }
  return cuda::stream_create(device.index, priority);
}

// True when e's marker has been reached (a CUDA event recorded, a CPU event
// complete).
bool host_done(EventState& e) {
  std::lock_guard<std::mutex> lock(e.mutex);
  return e.done;
}

// True when q has no closure or marker pending or running.  Caller holds
// q.mutex.
bool idle(const StreamQueue& q) { return q.completed == q.submitted; }

void enqueue(StreamQueue& q, Work w) {
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.work.push_back(std::move(w));
    ++q.submitted;
  }
  q.work_cv.notify_one();
}

}  // namespace

void detail::release_cuda_stream(Device device, int priority, uint64_t handle) {
  std::lock_guard<std::mutex> lock(g_cuda_pool_mutex);
  (*g_cuda_pool)[{device, priority}].push_back(handle);
}

// ---- Event ----

bool Event::query() const {
  if (!state_) return true;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->done) return false;
  }
  return !state_->cuda_recorded || cuda::event_query(state_->cuda_event);
}

void Event::synchronize() const {
  if (!state_) return;
  state_->wait();
  if (state_->cuda_recorded) cuda::event_synchronize(state_->cuda_event);
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    err = state_->error;
  }
  if (!err) {
    if (state_->cuda_recorded) raise_deferred_errors();  // the host waited: report failed checks
    return;
  }
  if (auto q = state_->queue.lock()) {
    std::lock_guard<std::mutex> lock(q->mutex);
    if (q->error == err) q->error = nullptr;  // reported: the stream runs work again
  }
  std::rethrow_exception(err);
}

double Event::elapsed_ms(const Event& later) const {
  LOOM_CHECK(state_ && later.state_, "Event::elapsed_ms: both events must have been recorded "
             "on a stream (got a default-constructed event)");
  LOOM_CHECK(state_->cuda == later.state_->cuda, "Event::elapsed_ms: cannot time an event of ",
             state_->stream_name, " against one of ", later.state_->stream_name,
             " (a CUDA event and a CPU event)");
  LOOM_CHECK(query() && later.query(), "Event::elapsed_ms: both events must be complete; "
             "call synchronize() first");
  if (state_->cuda) {
    LOOM_CHECK(state_->timing && later.state_->timing, "Event::elapsed_ms: CUDA events must "
               "be recorded with timing: use record(/*enable_timing=*/true) on ",
               state_->timing ? later.state_->stream_name : state_->stream_name);
    LOOM_CHECK(state_->cuda_recorded && later.state_->cuda_recorded, "Event::elapsed_ms: "
               "an event was never recorded on its CUDA stream (its stream had failed)");
    return cuda::event_elapsed_ms(state_->cuda_event, later.state_->cuda_event);
  }
  std::chrono::duration<double, std::milli> d = later.state_->time - state_->time;
  return d.count();
}

std::string Event::stream_name() const { return state_ ? state_->stream_name : std::string(); }

// ---- Stream ----

Stream Stream::default_stream(Device device) { return Stream(process_stream(device, 0)); }
Stream Stream::copy_stream(Device device) { return Stream(process_stream(device, 1)); }

Stream Stream::create(Device device) { return create(device, 0); }

Stream Stream::create(Device device, int priority) {
  check_device(device, "Stream::create");
  const PriorityRange range = priority_range(device);
  LOOM_CHECK(priority <= range.least && priority >= range.greatest, "Stream::create: priority ",
             priority, " is outside the range of ", device, " streams: ", range.least,
             " (least urgent, the default) to ", range.greatest, " (most urgent)",
             device.is_cpu() ? "; CPU streams have no priorities" : "");
  static std::atomic<int> counter{0};
  std::string name = device.str() + " stream " + std::to_string(++counter);
  if (priority != 0) name += " (priority " + std::to_string(priority) + ")";
  const uint64_t handle = device.is_cuda() ? acquire_cuda_stream(device, priority) : 0;
  return Stream(make_impl(device, std::move(name), true, handle, priority));
}

Stream::PriorityRange Stream::priority_range(Device device) {
  check_device(device, "Stream::priority_range");
  PriorityRange range;
  if (device.is_cuda()) cuda::stream_priority_range(device.index, &range.least, &range.greatest);
  return range;
}

Device Stream::device() const { return impl_->queue->device; }
std::string Stream::name() const { return impl_->queue->name; }
int Stream::priority() const { return impl_->queue->priority; }

uint64_t Stream::native_handle() const {
  LOOM_CHECK(impl_->queue->device.is_cuda(), "Stream::native_handle: ", name(),
             " is a CPU stream (a worker thread); only CUDA streams have a native handle");
  return impl_->queue->handle;
}

void Stream::submit(std::function<void()> fn) const {
  LOOM_CHECK(fn != nullptr, "Stream::submit: the closure for ", name(), " is empty");
  Work w;
  w.kind = Work::kClosure;
  w.fn = std::move(fn);
  w.state = capture_state();
  enqueue(*impl_->queue, std::move(w));
}

void Stream::wait_event(const Event& event) const {
  if (!event.state_) return;  // a default event is complete
  StreamQueue& q = *impl_->queue;
  if (q.device.is_cuda()) {
    bool now;
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      now = idle(q);
    }
    // An idle launcher: wait here, so work queued directly from this thread
    // afterwards is ordered too.  A worker thread must not block on another
    // stream's pending marker (that stream may be waiting for it): queue it.
    if (now && (!t_is_worker || host_done(*event.state_))) {
      event.state_->wait();  // the host part (recorded, or a CPU event complete)
      const std::exception_ptr err = wait_done_event(q, *event.state_);
      if (err) {
        std::lock_guard<std::mutex> lock(q.mutex);
        if (!q.error) q.error = err;
      }
      return;
    }
  }
  Work w;
  w.kind = Work::kWait;
  w.event = event.state_;
  enqueue(*impl_->queue, std::move(w));
}

Event Stream::record(bool enable_timing) const {
  Event e;
  e.state_ = std::make_shared<EventState>();
  e.state_->stream_name = impl_->queue->name;
  e.state_->queue = impl_->queue;
  StreamQueue& q = *impl_->queue;
  if (q.device.is_cuda()) {
    e.state_->cuda = true;
    e.state_->timing = enable_timing;
    e.state_->cuda_event = cuda::event_create(q.device.index, enable_timing);
    std::unique_lock<std::mutex> lock(q.mutex);
    if (idle(q)) {
      // Nothing pending on the launcher: record now, on this thread, so the
      // event covers exactly what has been queued on the stream so far.
      const std::exception_ptr failed = record_cuda_event(q, *e.state_);
      if (failed) std::rethrow_exception(failed);
      const std::exception_ptr err = q.error;
      lock.unlock();
      e.state_->complete(err);
      return e;
    }
  }
  Work w;
  w.kind = Work::kRecord;
  w.event = e.state_;
  enqueue(*impl_->queue, std::move(w));
  return e;
}

void Stream::synchronize() const { record().synchronize(); }

bool Stream::query() const {
  StreamQueue& q = *impl_->queue;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (!idle(q)) return false;
  }
  return !q.device.is_cuda() || cuda::stream_query(q.device.index, q.handle);
}

// ---- current stream ----

Stream current_stream(Device device) {
  auto it = t_guarded.find(device);
  if (it != t_guarded.end() && it->second) return Stream::from_impl(it->second);
  if (t_is_worker && t_worker_device == device)
    if (auto impl = t_worker_impl.lock()) return Stream::from_impl(impl);
  return Stream::default_stream(device);
}

uint64_t cuda::current_stream_handle(int device) {
  if (device < 0) return 0;  // never throws
  const Device d(kCUDA, device);
  if (!t_guarded.empty()) {
    auto it = t_guarded.find(d);
    if (it != t_guarded.end() && it->second) return it->second->queue->handle;
  }
  if (t_is_worker && t_worker_device == d) return t_worker_handle;
  return 0;  // the default stream: the legacy default stream
}

StreamGuard::StreamGuard(Stream stream) : device_(stream.device()) {
  auto& slot = t_guarded[device_];
  previous_ = slot;
  slot = stream.impl_;
}

StreamGuard::~StreamGuard() {
  if (previous_)
    t_guarded[device_] = previous_;
  else
    t_guarded.erase(device_);
}

// ---- thread share ----

void set_device_num_threads(Device device, int n) {
  LOOM_CHECK(device.is_cpu(), "set_device_num_threads: expected a CPU device, got ", device);
  LOOM_CHECK(n >= 0, "set_device_num_threads: expected a thread count >= 0 (0 = default) for ",
             device, ", got ", n);
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  if (n == 0)
    g_thread_overrides.erase(device.index);
  else
    g_thread_overrides[device.index] = n;
}

int device_num_threads(Device device) {
  LOOM_CHECK(device.is_cpu(), "device_num_threads: expected a CPU device, got ", device);
  {
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    auto it = g_thread_overrides.find(device.index);
    if (it != g_thread_overrides.end()) return it->second;
  }
  const int devices = std::max(2, std::max(g_highest_cpu_index.load(), device.index) + 1);
  return std::max(1, get_num_threads() / devices);
}

void register_stream_state(StreamStateHook hook) {
  LOOM_CHECK(hook.get && hook.set, "register_stream_state: both get and set must be set");
  std::lock_guard<std::mutex> lock(hooks_mutex());
  hooks().push_back(std::move(hook));
}

}  // namespace loom
