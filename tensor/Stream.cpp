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

#include "tensor/Error.h"
#include "tensor/Parallel.h"

namespace loom {
namespace detail {

using Clock = std::chrono::steady_clock;

struct StreamQueue;

// What an Event points at: set once by the record marker on the worker.
struct EventState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Clock::time_point time;
  std::exception_ptr error;        // the stream's unreported error at the marker
  std::string stream_name;
  std::weak_ptr<StreamQueue> queue;  // to clear the error once reported

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
  std::mutex mutex;
  std::condition_variable work_cv;
  std::deque<Work> work;
  bool stop = false;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  std::exception_ptr error;  // first unreported error; later closures skipped
  std::weak_ptr<StreamImpl> impl;  // for current_stream() inside closures
};

struct StreamImpl {
  std::shared_ptr<StreamQueue> queue;
  std::thread thread;
  bool owned = false;  // created (joined on destruction) vs process-lifetime
  pid_t pid = ::getpid();  // the process whose thread serves it

  ~StreamImpl() {
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
thread_local bool t_is_worker = false;

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
  set_thread_num_threads(0);
  set_thread_num_threads(device_num_threads(q.device));
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
  t_is_worker = true;
  t_worker_device = q->device;
  t_worker_impl = q->impl;
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
        std::exception_ptr err;
        {
          std::lock_guard<std::mutex> lock(q->mutex);
          err = q->error;
          ++q->completed;  // before the event completes: query() agrees with it
        }
        w.event->complete(err);
        continue;
      }
      case Work::kWait: {
        w.event->wait();
        std::exception_ptr err;
        {
          std::lock_guard<std::mutex> lock(w.event->mutex);
          err = w.event->error;
        }
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

void check_device(Device device) {
  LOOM_CHECK(!device.is_cuda(), "CUDA streams are not implemented yet (issue 5): cannot "
             "create a stream for ", device, "; use CPU logical devices (cpu:0, cpu:1, ...)");
  LOOM_CHECK(device.index >= 0, "Stream: expected a device index >= 0, got ", device);
  int seen = g_highest_cpu_index.load();
  while (device.index > seen && !g_highest_cpu_index.compare_exchange_weak(seen, device.index)) {
  }
}

std::shared_ptr<StreamImpl> make_impl(Device device, std::string name, bool owned) {
  auto impl = std::make_shared<StreamImpl>();
  impl->queue = std::make_shared<StreamQueue>();
  impl->queue->device = device;
  impl->queue->name = std::move(name);
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
  check_device(device);
  ProcessStreams& registry = *g_process_streams.load();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto& slot = registry.streams[{device, kind}];
  if (!slot)
    slot = make_impl(device, device.str() + (kind == 0 ? " default stream" : " copy stream"),
                     false);
  return slot;
}

void enqueue(StreamQueue& q, Work w) {
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.work.push_back(std::move(w));
    ++q.submitted;
  }
  q.work_cv.notify_one();
}

}  // namespace

// ---- Event ----

bool Event::query() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

void Event::synchronize() const {
  if (!state_) return;
  state_->wait();
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    err = state_->error;
  }
  if (!err) return;
  if (auto q = state_->queue.lock()) {
    std::lock_guard<std::mutex> lock(q->mutex);
    if (q->error == err) q->error = nullptr;  // reported: the stream runs work again
  }
  std::rethrow_exception(err);
}

double Event::elapsed_ms(const Event& later) const {
  LOOM_CHECK(state_ && later.state_, "Event::elapsed_ms: both events must have been recorded "
             "on a stream (got a default-constructed event)");
  LOOM_CHECK(query() && later.query(), "Event::elapsed_ms: both events must be complete; "
             "call synchronize() first");
  std::chrono::duration<double, std::milli> d = later.state_->time - state_->time;
  return d.count();
}

std::string Event::stream_name() const { return state_ ? state_->stream_name : std::string(); }

// ---- Stream ----

Stream Stream::default_stream(Device device) { return Stream(process_stream(device, 0)); }
Stream Stream::copy_stream(Device device) { return Stream(process_stream(device, 1)); }

Stream Stream::create(Device device) {
  check_device(device);
  static std::atomic<int> counter{0};
  return Stream(make_impl(device, device.str() + " stream " + std::to_string(++counter), true));
}

Device Stream::device() const { return impl_->queue->device; }
std::string Stream::name() const { return impl_->queue->name; }

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
  Work w;
  w.kind = Work::kWait;
  w.event = event.state_;
  enqueue(*impl_->queue, std::move(w));
}

Event Stream::record() const {
  Event e;
  e.state_ = std::make_shared<EventState>();
  e.state_->stream_name = impl_->queue->name;
  e.state_->queue = impl_->queue;
  Work w;
  w.kind = Work::kRecord;
  w.event = e.state_;
  enqueue(*impl_->queue, std::move(w));
  return e;
}

void Stream::synchronize() const { record().synchronize(); }

bool Stream::query() const {
  std::lock_guard<std::mutex> lock(impl_->queue->mutex);
  return impl_->queue->completed == impl_->queue->submitted;
}

// ---- current stream ----

Stream current_stream(Device device) {
  auto it = t_guarded.find(device);
  if (it != t_guarded.end() && it->second) return Stream::from_impl(it->second);
  if (t_is_worker && t_worker_device == device)
    if (auto impl = t_worker_impl.lock()) return Stream::from_impl(impl);
  return Stream::default_stream(device);
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
