// Stream and Event: asynchronous, ordered work on a device.
//
// A Stream is a FIFO work queue bound to a device, the CPU analogue of a CUDA
// stream.  On a CPU logical device (cpu:0, cpu:1, ...) each stream is a worker
// thread that runs the submitted closures one after another, in submission
// order.  Every CPU device has a default (compute) stream and a copy stream;
// create() makes more.  Order between streams is expressed with events: an
// Event recorded on one stream completes when all work submitted to that
// stream before the record has run; another stream's wait_event() makes its
// later work wait for it.
//
// What a closure sees on the worker:
//   - the submitting thread's thread-local state registered with
//     register_stream_state() (tensor/StreamState.h: GradMode, so forward ops
//     submitted to cpu:1 record autograd history exactly as on the caller;
//     backward then runs on the engine's device threads);
//   - current_stream(device) == the stream that runs it;
//   - the device's share of the intra-op threads: device_num_threads(device)
//     (set_thread_num_threads is applied around every closure).
//
// Errors: an exception thrown by a closure is captured as a loom::Error naming
// the stream; the stream then skips (does not run) every later closure until
// the error has been reported by Stream::synchronize() or by synchronize() of
// an event recorded after the failure (which rethrow it and clear it, so the
// stream runs work again).  A stream that waits on an event whose work failed
// takes the error over (its later work is skipped too), so a failure in one
// pipeline stage reaches whoever synchronizes the last one.
//
// Memory: a closure owns what it captures; tensors captured by value stay
// alive until the closure has run and been destroyed, so CPU streams need no
// record_stream (the allocator cannot reuse their memory early).
//
// Lifetime: default and copy streams live for the whole process (their
// threads are detached and never joined, so process exit does not wait on
// them).  A stream from create() finishes its queued work and joins its thread
// when its last handle goes away.
//
// fork(): worker threads do not survive it.  In a forked child,
// default_stream()/copy_stream() return fresh streams (new workers); streams
// from create() in the parent must not be used there (dropping them is safe).
//
// Do not synchronize a stream (or run a Pipe) from inside a closure running
// on that same stream: it would wait for itself.
//
// CUDA devices (cuda:i): a Stream is a cudaStream_t plus the same kind of
// host worker thread, its launcher.
//   - default_stream(cuda:i) is the legacy default stream of GPU i (handle
//     0), as in PyTorch: the stream every kernel, copy and allocation uses
//     unless a StreamGuard or a closure says otherwise, and the one the
//     autograd engine's device threads run backward on.  copy_stream(cuda:i)
//     and create(cuda:i[, priority]) are non-blocking streams (they do not
//     synchronise with the legacy stream).  Streams from create() go back to
//     a per-device pool when their last handle goes (CUDA streams are never
//     destroyed, so a stream id the caching allocator knows always means the
//     same stream).
//   - submit(fn) runs fn on the stream's launcher thread with this stream
//     current (current_stream(cuda:i), cuda::current_stream_handle(i) and
//     the thread's current CUDA device say so), after every earlier closure
//     has run.  fn returns once it has *queued* its kernels; the GPU runs
//     them later, in stream order.  So submit is asynchronous twice over,
//     and closures on different streams queue work concurrently.  Errors
//     thrown by fn (including CUDA launch errors) behave as on CPU.
//   - Work can also be queued directly from any thread under a StreamGuard
//     (as in PyTorch).  Such kernels follow whatever the stream had already
//     been given (record/wait_event on an idle launcher act at once, on the
//     calling thread); they are not ordered after closures still waiting in
//     the launcher's queue.  Use one style per stream, or synchronize between.
//   - record() returns an Event over a cudaEvent_t, recorded once the
//     closures submitted before it have run (at once when none is pending).
//     It completes when the GPU has passed that point.  record(true) keeps
//     timestamps for elapsed_ms (GPU time); plain record() does not.
//   - wait_event(e): GPU-side (cudaStreamWaitEvent) for a CUDA event of any
//     device, once e has been recorded; for an event of a CPU stream the
//     wait is on the host: the launcher (or, when the launcher is idle and
//     the caller is no stream's worker, the calling thread) blocks until e
//     is complete, so nothing queued afterwards can start before it.  A CPU
//     stream waiting on a CUDA event blocks its worker until the GPU passes
//     it (cudaEventSynchronize).
//   - synchronize()/query() cover the launcher's queue and the GPU work.
//   - CUDA errors throw loom::Error (from the call, or, inside a closure,
//     through synchronize as above).
// Built without CUDA, or without a visible GPU, every constructor of a
// cuda stream throws loom::Error naming the device and the reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensor/Device.h"
#include "tensor/StreamState.h"

namespace loom {

namespace detail {
struct StreamImpl;
struct EventState;
}  // namespace detail

class Stream;
Stream current_stream(Device device);

// A point in a stream's work.  Copyable handle; a default-constructed Event
// is already complete.
class Event {
 public:
  Event() = default;
  // True when the work the event waits for has run (successfully or not);
  // for a CUDA event, when the GPU has passed it.  Throws loom::Error on a
  // CUDA error.
  bool query() const;
  // Blocks until query() is true; rethrows (as loom::Error naming the stream)
  // the error of the work it waited for, if any, and CUDA errors.
  void synchronize() const;
  // Milliseconds from this event's completion to `later`'s.  Both must be
  // complete (synchronize first) and recorded; throws loom::Error otherwise.
  // CUDA events: GPU time; both must come from record(true) on CUDA streams
  // (a CUDA event cannot be timed against a CPU one).
  double elapsed_ms(const Event& later) const;
  // The stream it was recorded on ("" for a default-constructed event).
  std::string stream_name() const;

 private:
  friend class Stream;
  std::shared_ptr<detail::EventState> state_;
};

class Stream {
 public:
  // The device's compute stream (one per device, lives for the process).
  static Stream default_stream(Device device);
  // The device's copy stream, for hand-over copies (one per device).
  static Stream copy_stream(Device device);
  // A new stream on `device`; its thread ends when the last handle goes.
  static Stream create(Device device);
  // The same with a priority from priority_range(device) (lower numbers are
  // more urgent; CPU streams only have priority 0).  Throws loom::Error for
  // a priority outside the range.
  static Stream create(Device device, int priority);
  // All of them throw loom::Error for a cuda device that cannot be used
  // (built without CUDA, no GPU visible, bad index), naming the device.

  // Stream priorities of `device`: least (the default, 0) to greatest (the
  // most urgent, numerically lowest, e.g. -5).  {0, 0} for CPU devices.
  struct PriorityRange {
    int least = 0;
    int greatest = 0;
  };
  static PriorityRange priority_range(Device device);

  Device device() const;
  // "cpu:1 default stream", "cpu copy stream", "cpu:1 stream 3".
  std::string name() const;
  // The priority it was created with (0 unless create(device, priority)).
  int priority() const;
  // A CUDA stream's cudaStream_t as an integer (0: the legacy default
  // stream), e.g. for cuda::record_stream.  Throws loom::Error for a CPU
  // stream.
  uint64_t native_handle() const;

  // Runs fn on the stream after all earlier work (unless an earlier closure
  // failed and its error has not been reported yet: then fn is skipped).
  // Throws loom::Error when fn is empty.
  void submit(std::function<void()> fn) const;
  // Work submitted after this call waits until `event` has completed.  An
  // event of a failed stream passes its error on to this stream.
  void wait_event(const Event& event) const;
  // An event that completes once all work submitted so far has run.
  // enable_timing matters on CUDA streams only (CPU events always carry a
  // time): elapsed_ms needs it there.
  Event record(bool enable_timing = false) const;
  // Blocks until all submitted work has run; rethrows the first unreported
  // error of this stream (loom::Error naming the stream) and clears it.
  void synchronize() const;
  // True when all work submitted so far has run (on CUDA: been launched and
  // finished on the GPU).  Throws loom::Error on a CUDA error.
  bool query() const;

  bool operator==(const Stream& other) const { return impl_ == other.impl_; }
  bool operator!=(const Stream& other) const { return impl_ != other.impl_; }

 private:
  friend Stream current_stream(Device device);
  friend class StreamGuard;
  explicit Stream(std::shared_ptr<detail::StreamImpl> impl) : impl_(std::move(impl)) {}
  static Stream from_impl(std::shared_ptr<detail::StreamImpl> impl) {
    return Stream(std::move(impl));
  }
  std::shared_ptr<detail::StreamImpl> impl_;
};

// The calling thread's current stream for `device`: the innermost active
// StreamGuard's stream for that device, else (inside a closure running on a
// stream of that device) that stream, else default_stream(device).  For
// cuda:i, cuda::current_stream_handle(i) is its native_handle() (and never
// creates a stream).
Stream current_stream(Device device);

// Makes `stream` the current stream of its device on this thread for the
// guard's lifetime; guards nest (the destructor restores the previous one).
// For a CUDA stream, kernels, copies and allocations for that device on this
// thread go to it (it does not change the current CUDA device).
class StreamGuard {
 public:
  explicit StreamGuard(Stream stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  std::shared_ptr<detail::StreamImpl> previous_;
};

// Intra-op threads a CPU device's stream workers use.  Default: an even share
// of the process-wide get_num_threads() over the CPU devices in use (those up
// to the highest CPU index any stream was created for, and at least two:
// max(1, threads / max(2, highest_index + 1))), so cpu:0 and cpu:1 on a
// 2-core machine each get one core.  set_device_num_threads overrides it for
// one device (0 restores the default); n < 0 or a non-CPU device throws.
void set_device_num_threads(Device device, int n);
int device_num_threads(Device device);

}  // namespace loom
