// CUDA graph capture and replay (see Graph.h).
#include "tensor/cuda/Graph.h"

#include <cuda_runtime.h>

#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"
#include "tensor/cuda/Check.h"
#include "tensor/cuda/Launch.cuh"

namespace loom {
namespace cuda {

void graph_capture_begin(int device, uint64_t stream, bool relaxed) {
  LOOM_CHECK(stream != 0, "cuda::Graph: the legacy default stream cannot be captured");
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(
      as_stream(stream), relaxed ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeThreadLocal));
}

void* graph_capture_end(int device, uint64_t stream) {
  DeviceGuard guard(device);
  cudaGraph_t graph = nullptr;
  LOOM_CUDA_CHECK(cudaStreamEndCapture(as_stream(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  LOOM_CUDA_CHECK(status);
  return exec;
}

void graph_launch(void* exec, int device, uint64_t stream) {
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), as_stream(stream)));
}

void graph_exec_destroy(void* exec) noexcept {
  if (exec != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

bool stream_is_capturing(int device, uint64_t stream) {
  if (stream == 0) return false;
  DeviceGuard guard(device);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LOOM_CUDA_CHECK(cudaStreamIsCapturing(as_stream(stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace cuda
}  // namespace loom
