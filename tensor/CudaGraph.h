// cuda::Graph: a sequence of GPU work captured once and replayed with one
// launch (CUDA graphs; PyTorch's torch.cuda.CUDAGraph).  For a training step
// of fixed shapes, replaying removes the per-kernel launch cost on the host.
//
//   Tensor x = empty({128, 1, 28, 28}, cuda), y = empty({128}, kInt64 cuda);
//   for (int i = 0; i < 3; ++i) step(x, y);   // warm up eagerly first
//   cuda::Graph graph;
//   graph.capture_begin();
//   optimizer.zero_grad();
//   Tensor loss = criterion(model(x), y);     // queued on the capture stream
//   loss.backward();
//   optimizer.step();
//   graph.capture_end();
//   for (auto& batch : loader) {
//     x.copy_(batch.data); y.copy_(batch.target);  // new data, same memory
//     graph.replay();                               // the whole step, one launch
//     double l = loss.item();                       // the static output
//   }
//
// How it works: capture_begin makes a private stream the thread's current
// stream on the device (ordered after the work already queued there) and
// starts CUDA stream capture on it, so every kernel loom queues is recorded,
// not run.  Memory allocated during capture comes from that stream's pool in
// the caching allocator, which is kept (never returned to the driver, never
// used by other streams) while the graph lives: the replays write the same
// addresses.  replay() launches the graph on the device's current stream.
//
// What the captured work may not do (each is a loom::Error when tried):
// wait for the device (item(), copies to the host, synchronize()), draw
// dropout masks (they would repeat on every replay), or take an Adam/AdamW
// step (its step count lives on the host).  Also, as in PyTorch: shapes,
// and the host-side values baked into kernels (SGD's learning rate) are
// fixed at capture; tensors the graph reads (inputs, parameters, optimizer
// state) must stay alive and be updated in place; the warm-up steps must run
// before capture so lazily created state (momentum buffers, cuDNN/cuBLAS
// handles, algorithm choices) exists; index values and class targets are
// not checked inside a graph (the kernels skip bad ones); and only work of
// the capturing thread on one device is captured.
#pragma once

#include <cstdint>
#include <memory>

namespace loom {
namespace cuda {

struct GraphOptions {
  // cudaStreamCaptureModeRelaxed (default): capture-unsafe calls made by
  // libraries (cuBLAS creating a workspace) or other threads do not
  // invalidate the capture.  False: cudaStreamCaptureModeThreadLocal.
  bool relaxed = true;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts capturing the calling thread's work on `device` (-1: the current
  // device).  Throws loom::Error when already capturing or captured (reset()
  // first) or for a device that cannot be used.
  void capture_begin(int device = -1, GraphOptions options = {});
  // Ends the capture, restores the thread's previous stream and instantiates
  // the graph.  Throws loom::Error when not capturing, or when CUDA
  // invalidated the capture (naming what it said).
  void capture_end();
  // Queues one replay on the device's current stream (asynchronous).
  void replay();
  // Frees the executable graph and releases its memory to the cache (after
  // the last replay's work).  The graph can be captured again.
  void reset();

  bool is_capturing() const;
  bool is_captured() const;
  int device() const;  // -1 before the first capture

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether the calling thread's current stream on `device` is being
// captured.  False without CUDA.
bool is_current_stream_capturing(int device);
// Throws loom::Error "<what> cannot run while a cuda::Graph is being
// captured: <why>" when the current stream of `device` is being captured.
void check_not_capturing(int device, const char* what, const char* why);

}  // namespace cuda
}  // namespace loom
