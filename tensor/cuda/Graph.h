// CUDA graph primitives on opaque handles, for tensor/CudaGraph.cpp (loom's
// cuda::Graph).  Defined in Graph.cu; without CUDA, stubs that throw
// loom::Error (tensor/CudaRuntime.cpp).  Streams are cudaStream_t as
// uint64_t (never 0: the legacy default stream cannot be captured); an
// executable graph is a cudaGraphExec_t as void*.
#pragma once

#include <cstdint>

namespace loom {
namespace cuda {

// Starts capturing `stream` (of `device`).  `relaxed`: other threads and
// libraries may make capture-unsafe calls (cudaMalloc for a new cache
// segment, cuBLAS's workspace) without invalidating the capture
// (cudaStreamCaptureModeRelaxed); else cudaStreamCaptureModeThreadLocal.
void graph_capture_begin(int device, uint64_t stream, bool relaxed);
// Ends the capture and instantiates it; throws loom::Error (naming what CUDA
// said) when the capture was invalidated.
void* graph_capture_end(int device, uint64_t stream);
// Queues one replay of `exec` on `stream`.
void graph_launch(void* exec, int device, uint64_t stream);
// Never throws.
void graph_exec_destroy(void* exec) noexcept;
// Whether `stream` of `device` is being captured (0, the legacy default
// stream, never is).
bool stream_is_capturing(int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
