// cuDNN's library-wide calls, for loom's CUDA emulator: versions and
// properties, error strings, the calling thread's last error
// (cudnnGetLastErrorString; CUDNN_LOGERR_DBG=1 also prints it) and handles
// with their streams.  See CudnnState.h for the rest of cuDNN.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "CudnnState.h"
#include "LiveHandles.h"

namespace loom_emu {
namespace cudnn {

// ---- errors ----------------------------------------------------------------------------------

namespace {

thread_local std::string t_last_error;

bool log_errors() {
  static const bool on = [] {
    const char* v = std::getenv("CUDNN_LOGERR_DBG");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

}  // namespace

// Records why `fn` fails with `status` and returns the status.
cudnnStatus_t fail(cudnnStatus_t status, const char* fn, const std::string& why) {
  t_last_error = std::string(fn) + ": " + cudnnGetErrorString(status) + ": " + why;
  if (log_errors()) std::fprintf(stderr, "cuDNN (emulated) error: %s\n", t_last_error.c_str());
  return status;
}

// ---- handles -----------------------------------------------------------------------------------

using Handles = libs::LiveHandles<cudnnContext>;

bool is_live(const cudnnContext* h) { return Handles::instance().contains(h); }

}  // namespace cudnn
}  // namespace loom_emu

using loom_emu::cudnn::fail;
using loom_emu::cudnn::is_live;

extern "C" {

// ---- the library and its handles ----------------------------------------------------------

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

size_t cudnnGetCudartVersion(void) { return CUDART_VERSION; }

cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetProperty", "value is NULL");
  switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUDNN_MINOR; return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; return CUDNN_STATUS_SUCCESS;
  }
  return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetProperty", "unknown property");
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
      return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH:
      return "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH";
    case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
    case CUDNN_STATUS_LICENSE_ERROR: return "CUDNN_STATUS_LICENSE_ERROR";
    case CUDNN_STATUS_RUNTIME_IN_PROGRESS: return "CUDNN_STATUS_RUNTIME_IN_PROGRESS";
    case CUDNN_STATUS_RUNTIME_FP_OVERFLOW: return "CUDNN_STATUS_RUNTIME_FP_OVERFLOW";
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_INVALID_VALUE: return "CUDNN_STATUS_INVALID_VALUE";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
      return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES:
      return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN:
      return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART";
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
      return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
      return "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING";
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE";
    case CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT:
      return "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT";
    case CUDNN_STATUS_NOT_SUPPORTED_PADDING: return "CUDNN_STATUS_NOT_SUPPORTED_PADDING";
    case CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM:
      return "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API:
      return "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API";
    case CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE:
      return "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM:
      return "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER:
      return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    case CUDNN_STATUS_EXECUTION_FAILED_CUBLAS: return "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDART: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
    case CUDNN_STATUS_EXECUTION_FAILED_CURAND: return "CUDNN_STATUS_EXECUTION_FAILED_CURAND";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (message == nullptr || max_size == 0) return;
  const std::string& text = loom_emu::cudnn::t_last_error;
  const size_t n = std::min(text.size(), max_size - 1);
  std::memcpy(message, text.data(), n);
  message[n] = '\0';
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "handle is NULL");
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate", "no current CUDA device");
  auto* h = new cudnnContext();
  h->device = device;
  loom_emu::cudnn::Handles::instance().add(h);
  *handle = h;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (handle == nullptr || !loom_emu::cudnn::Handles::instance().remove(handle))
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy", "not a live cuDNN handle");
  delete handle;  // queued work holds copies of what it needs, never the handle
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "not a live handle");
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
  if (!is_live(handle) || streamId == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream", "not a live handle, or streamId NULL");
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
