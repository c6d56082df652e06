// cuDNN on the host, for loom's CUDA emulator: handles, 4-d descriptors,
// algorithm queries and the 2-d convolution passes (see include/cudnn.h for
// what is and is not emulated).  This header holds what its four source
// files share: what a handle and the tensor, filter and convolution
// descriptors hold, the convolution a set of descriptors describes (Conv),
// and the helpers more than one of them calls.  Internal to
// tools/cuda/emu/src.
//   CudnnHandles.cpp      versions, error strings and the last error, handles
//                         and their streams
//   CudnnDescriptors.cpp  tensor, filter and convolution descriptors, and
//                         check_conv (the checks every convolution call makes)
//   CudnnAlgorithms.cpp   the algorithms offered, cudnnGet*Algorithm_v7,
//                         cudnnFind*Algorithm and the workspace queries
//   CudnnConvolution.cpp  the passes, cudnnAddTensor and the bias gradient:
//                         their loops and how they are queued
//
// Every call checks its arguments as cuDNN does and, for the calls that
// compute, copies what the descriptors say (callers may destroy them as soon
// as the call returns) and queues the work through loom_emu::enqueue on the
// handle's stream.  A failing call records why; cudnnGetLastErrorString
// returns it, and CUDNN_LOGERR_DBG=1 also prints it to stderr, as cuDNN's own
// logging does.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>

struct cudnnContext {
  int device = 0;
  cudaStream_t stream = nullptr;
};

namespace loom_emu {
namespace cudnn {

// A 4-d array: dims (n, c, h, w) -- for a filter (k, c/groups, r, s) -- and
// element strides.
struct Dims4 {
  int64_t d[4] = {0, 0, 0, 0};
  int64_t s[4] = {0, 0, 0, 0};
  int64_t count() const { return d[0] * d[1] * d[2] * d[3]; }
  int64_t at(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return a * s[0] + b * s[1] + c * s[2] + e * s[3];
  }
  // One past the largest element offset.
  int64_t span() const {
    int64_t last = 0;
    for (int i = 0; i < 4; ++i) last += (d[i] - 1) * s[i];
    return last + 1;
  }
};

}  // namespace cudnn
}  // namespace loom_emu

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  loom_emu::cudnn::Dims4 dims;
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  loom_emu::cudnn::Dims4 dims;  // (k, c, r, s)
};

struct cudnnConvolutionStruct {
  bool set = false;  // cudnnSetConvolution2dDescriptor called
  int pad[2] = {0, 0};
  int stride[2] = {1, 1};
  int dilation[2] = {1, 1};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace loom_emu {
namespace cudnn {

// ---- errors and handles (CudnnHandles.cpp) ---------------------------------------------------

// Records why `fn` fails with `status` and returns the status.
cudnnStatus_t fail(cudnnStatus_t status, const char* fn, const std::string& why);

// Whether h is a handle cudnnCreate made and cudnnDestroy has not destroyed.
bool is_live(const cudnnContext* h);

// ---- data types and convolution geometry (CudnnDescriptors.cpp) ------------------------------

// Whether the emulator computes with data of type t.
bool is_computable(cudnnDataType_t t);

// "(n, c, h, w)".
std::string dims_text(const Dims4& d);

enum class Pass { kForward, kBackwardData, kBackwardFilter };

// Everything a convolution pass needs, by value.
struct Conv {
  Dims4 x, w, y;  // w: (K, C/groups, R, S)
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t groups = 1;
  int64_t pad[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  bool flip = false;  // CUDNN_CONVOLUTION: the filter is flipped
  bool tf32 = false;  // float32 operands rounded to TF32
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// Checks (x, w, conv, y) as cuDNN does for every convolution call and fills
// `c`.  For the backward passes y is dy and x is dx, w is dw.
cudnnStatus_t check_conv(const char* fn, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                         const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, Conv* c);

// ---- algorithms (CudnnAlgorithms.cpp) ----------------------------------------------------------

// The workspace `algo` needs for this convolution; NOT_SUPPORTED for one the
// emulator does not offer, BAD_PARAM for a value outside the enum.
cudnnStatus_t algo_workspace(const char* fn, Pass pass, int algo, const Conv& c, size_t* bytes);

}  // namespace cudnn
}  // namespace loom_emu
