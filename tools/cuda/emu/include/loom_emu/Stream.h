// Stream order for the emulated CUDA libraries (cuBLAS, cuDNN, NCCL).
//
// Work a library call puts "on a stream" goes through enqueue: it runs on
// that stream's host thread after everything queued there before it, and
// the call returns at once, as on a GPU.  Pointers to device memory are
// host pointers the work may read and write directly.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace loom_emu {

// Runs `work` in order on `stream` (0: the current device's legacy stream).
// While the stream is being captured into a graph, `work` is recorded
// instead and runs each time the graph is launched.  An exception thrown
// by `work` becomes the device's sticky error (cudaErrorLaunchFailure),
// its message printed to stderr.
void enqueue(cudaStream_t stream, std::function<void()> work);

// The device a stream belongs to (0: the current device).
int stream_device(cudaStream_t stream);

}  // namespace loom_emu
