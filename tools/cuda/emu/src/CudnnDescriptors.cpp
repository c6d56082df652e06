// cuDNN's tensor, filter and convolution descriptors, for loom's CUDA
// emulator: creating, setting and reading them, the output size of a
// convolution, and check_conv, which checks as cuDNN does that (x, w, conv,
// y) describe one convolution and copies what they say for the calls that
// compute.  See CudnnState.h for the rest of cuDNN.
#include <cstdint>
#include <limits>
#include <string>

#include "CudnnState.h"
#include "HostMath.h"

namespace loom_emu {
namespace cudnn {

// ---- data types --------------------------------------------------------------------------------

bool is_computable(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_DOUBLE || t == CUDNN_DATA_HALF ||
         t == CUDNN_DATA_BFLOAT16;
}

namespace {

bool is_known(cudnnDataType_t t) {
  return static_cast<int>(t) >= CUDNN_DATA_FLOAT &&
         static_cast<int>(t) <= CUDNN_DATA_FAST_FLOAT_FOR_FP8;
}

size_t type_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_INT8x4:
    case CUDNN_DATA_UINT8x4: return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8x32: return 32;
    default: return 1;
  }
}

const char* type_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return "CUDNN_DATA_FLOAT";
    case CUDNN_DATA_DOUBLE: return "CUDNN_DATA_DOUBLE";
    case CUDNN_DATA_HALF: return "CUDNN_DATA_HALF";
    case CUDNN_DATA_BFLOAT16: return "CUDNN_DATA_BFLOAT16";
    default: return "a data type the emulator does not compute with";
  }
}

}  // namespace

std::string dims_text(const Dims4& d) {
  return "(" + std::to_string(d.d[0]) + ", " + std::to_string(d.d[1]) + ", " +
         std::to_string(d.d[2]) + ", " + std::to_string(d.d[3]) + ")";
}

// ---- convolution geometry ----------------------------------------------------------------------

namespace {

bool tf32_applies(cudnnDataType_t type, cudnnMathType_t math) {
  return type == CUDNN_DATA_FLOAT && math != CUDNN_FMA_MATH &&
         !libs::tf32_disabled_by_environment();
}

int64_t out_size(int64_t in, int64_t pad, int64_t kernel, int64_t stride, int64_t dilation) {
  const int64_t extent = (kernel - 1) * dilation + 1;
  const int64_t room = in + 2 * pad - extent;
  return room < 0 ? 0 : room / stride + 1;
}

}  // namespace

// Checks (x, w, conv, y) as cuDNN does for every convolution call and fills
// `c`.  For the backward passes y is dy and x is dx, w is dw.
cudnnStatus_t check_conv(const char* fn, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                         const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, Conv* c) {
  if (x == nullptr || w == nullptr || conv == nullptr || y == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor is NULL");
  if (!x->set || !w->set || !conv->set || !y->set)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor was created but never set");
  if (x->type != w->type || x->type != y->type)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                std::string("the tensors' data types differ (x ") + type_name(x->type) +
                    ", w " + type_name(w->type) + ", y " + type_name(y->type) + ")");
  if (!is_computable(x->type))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
                "data type " + std::to_string(x->type) + " is not emulated");
  const bool compute_ok =
      (x->type == CUDNN_DATA_FLOAT && conv->compute == CUDNN_DATA_FLOAT) ||
      (x->type == CUDNN_DATA_DOUBLE && conv->compute == CUDNN_DATA_DOUBLE) ||
      (x->type == CUDNN_DATA_HALF &&
       (conv->compute == CUDNN_DATA_HALF || conv->compute == CUDNN_DATA_FLOAT)) ||
      (x->type == CUDNN_DATA_BFLOAT16 && conv->compute == CUDNN_DATA_FLOAT);
  if (!compute_ok)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
                std::string("compute type ") + type_name(conv->compute) + " with data type " +
                    type_name(x->type) + " is not a supported configuration");
  const int64_t groups = conv->groups;
  const int64_t n = x->dims.d[0], ch = x->dims.d[1], h = x->dims.d[2], wd = x->dims.d[3];
  const int64_t k = w->dims.d[0], cg = w->dims.d[1], r = w->dims.d[2], s = w->dims.d[3];
  if (cg * groups != ch)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the filter's " + std::to_string(cg) + " input channels times " +
                    std::to_string(groups) + " groups do not make the input's " +
                    std::to_string(ch) + " channels");
  if (k % groups != 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                std::to_string(k) + " output channels do not split into " +
                    std::to_string(groups) + " groups");
  const int64_t p = out_size(h, conv->pad[0], r, conv->stride[0], conv->dilation[0]);
  const int64_t q = out_size(wd, conv->pad[1], s, conv->stride[1], conv->dilation[1]);
  if (p <= 0 || q <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the dilated filter " + dims_text(w->dims) + " does not fit the padded input " +
                    dims_text(x->dims));
  if (y->dims.d[0] != n || y->dims.d[1] != k || y->dims.d[2] != p || y->dims.d[3] != q)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the output tensor is " + dims_text(y->dims) + ", the convolution gives (" +
                    std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(p) +
                    ", " + std::to_string(q) + ")");
  const int64_t limit = std::numeric_limits<int32_t>::max();
  if (x->dims.span() > limit || y->dims.span() > limit || w->dims.span() > limit)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "a tensor has 2^31 elements or more");
  c->x = x->dims;
  c->w = w->dims;
  c->y = y->dims;
  c->type = x->type;
  c->groups = groups;
  for (int i = 0; i < 2; ++i) {
    c->pad[i] = conv->pad[i];
    c->stride[i] = conv->stride[i];
    c->dilation[i] = conv->dilation[i];
  }
  c->flip = conv->mode == CUDNN_CONVOLUTION;
  c->math = conv->math;
  c->tf32 = tf32_applies(x->type, conv->math);
  return CUDNN_STATUS_SUCCESS;
}

// ---- descriptors -------------------------------------------------------------------------------

namespace {

cudnnStatus_t set_dims(const char* fn, Dims4* out, const int d[4], const int64_t s[4]) {
  for (int i = 0; i < 4; ++i) {
    if (d[i] <= 0)
      return fail(CUDNN_STATUS_BAD_PARAM, fn,
                  "dimensions must be positive, got (" + std::to_string(d[0]) + ", " +
                      std::to_string(d[1]) + ", " + std::to_string(d[2]) + ", " +
                      std::to_string(d[3]) + ")");
    if (s[i] <= 0) return fail(CUDNN_STATUS_BAD_PARAM, fn, "strides must be positive");
  }
  for (int i = 0; i < 4; ++i) {
    out->d[i] = d[i];
    out->s[i] = s[i];
  }
  return CUDNN_STATUS_SUCCESS;
}

// Strides of a packed (n, c, h, w) array in `format`.
bool packed_strides(cudnnTensorFormat_t format, const int d[4], int64_t s[4]) {
  const int64_t c = d[1], h = d[2], w = d[3];
  if (format == CUDNN_TENSOR_NCHW) {
    s[0] = c * h * w, s[1] = h * w, s[2] = w, s[3] = 1;
    return true;
  }
  if (format == CUDNN_TENSOR_NHWC) {
    s[0] = h * w * c, s[1] = 1, s[2] = w * c, s[3] = c;
    return true;
  }
  return false;
}

}  // namespace

}  // namespace cudnn
}  // namespace loom_emu

using loom_emu::cudnn::Dims4;
using loom_emu::cudnn::fail;

extern "C" {

// ---- tensors ---------------------------------------------------------------------------------

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  if (tensorDesc == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateTensorDescriptor", "tensorDesc is NULL");
  *tensorDesc = new cudnnTensorStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
  const char* fn = "cudnnSetTensor4dDescriptor";
  if (tensorDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "tensorDesc is NULL");
  if (!loom_emu::cudnn::is_known(dataType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown data type " + std::to_string(dataType));
  const int d[4] = {n, c, h, w};
  int64_t s[4];
  if (!loom_emu::cudnn::packed_strides(format, d, s))
    return fail(format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED
                                                   : CUDNN_STATUS_BAD_PARAM,
                fn, "format " + std::to_string(format) + " is not NCHW or NHWC");
  const cudnnStatus_t st = loom_emu::cudnn::set_dims(fn, &tensorDesc->dims, d, s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  tensorDesc->type = dataType;
  tensorDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t tensorDesc,
                                           cudnnDataType_t dataType, int n, int c, int h, int w,
                                           int nStride, int cStride, int hStride, int wStride) {
  const char* fn = "cudnnSetTensor4dDescriptorEx";
  if (tensorDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "tensorDesc is NULL");
  if (!loom_emu::cudnn::is_known(dataType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown data type " + std::to_string(dataType));
  const int d[4] = {n, c, h, w};
  const int64_t s[4] = {nStride, cStride, hStride, wStride};
  const cudnnStatus_t st = loom_emu::cudnn::set_dims(fn, &tensorDesc->dims, d, s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  tensorDesc->type = dataType;
  tensorDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t tensorDesc,
                                         cudnnDataType_t* dataType, int* n, int* c, int* h,
                                         int* w, int* nStride, int* cStride, int* hStride,
                                         int* wStride) {
  if (tensorDesc == nullptr || !tensorDesc->set || dataType == nullptr || n == nullptr ||
      c == nullptr || h == nullptr || w == nullptr || nStride == nullptr || cStride == nullptr ||
      hStride == nullptr || wStride == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensor4dDescriptor",
                "a NULL pointer or an unset descriptor");
  const Dims4& d = tensorDesc->dims;
  *dataType = tensorDesc->type;
  *n = static_cast<int>(d.d[0]), *c = static_cast<int>(d.d[1]);
  *h = static_cast<int>(d.d[2]), *w = static_cast<int>(d.d[3]);
  *nStride = static_cast<int>(d.s[0]), *cStride = static_cast<int>(d.s[1]);
  *hStride = static_cast<int>(d.s[2]), *wStride = static_cast<int>(d.s[3]);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t tensorDesc, size_t* size) {
  if (tensorDesc == nullptr || !tensorDesc->set || size == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensorSizeInBytes",
                "a NULL pointer or an unset descriptor");
  *size = static_cast<size_t>(tensorDesc->dims.span()) *
          loom_emu::cudnn::type_size(tensorDesc->type);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;  // NULL is allowed
  return CUDNN_STATUS_SUCCESS;
}

// ---- filters ---------------------------------------------------------------------------------

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  if (filterDesc == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateFilterDescriptor", "filterDesc is NULL");
  *filterDesc = new cudnnFilterStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  const char* fn = "cudnnSetFilter4dDescriptor";
  if (filterDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "filterDesc is NULL");
  if (!loom_emu::cudnn::is_known(dataType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown data type " + std::to_string(dataType));
  const int d[4] = {k, c, h, w};
  int64_t s[4];
  if (!loom_emu::cudnn::packed_strides(format, d, s))
    return fail(format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED
                                                   : CUDNN_STATUS_BAD_PARAM,
                fn, "format " + std::to_string(format) + " is not NCHW or NHWC");
  const cudnnStatus_t st = loom_emu::cudnn::set_dims(fn, &filterDesc->dims, d, s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  filterDesc->type = dataType;
  filterDesc->format = format;
  filterDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t* dataType, cudnnTensorFormat_t* format,
                                         int* k, int* c, int* h, int* w) {
  if (filterDesc == nullptr || !filterDesc->set || dataType == nullptr || format == nullptr ||
      k == nullptr || c == nullptr || h == nullptr || w == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetFilter4dDescriptor",
                "a NULL pointer or an unset descriptor");
  *dataType = filterDesc->type;
  *format = filterDesc->format;
  *k = static_cast<int>(filterDesc->dims.d[0]), *c = static_cast<int>(filterDesc->dims.d[1]);
  *h = static_cast<int>(filterDesc->dims.d[2]), *w = static_cast<int>(filterDesc->dims.d[3]);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolution descriptors -------------------------------------------------------------

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  if (convDesc == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnCreateConvolutionDescriptor", "convDesc is NULL");
  *convDesc = new cudnnConvolutionStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
  if (convDesc == nullptr || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType",
                "convDesc is NULL or the math type is not valid");
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t* mathType) {
  if (convDesc == nullptr || mathType == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionMathType", "a NULL pointer");
  *mathType = convDesc->math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                            int groupCount) {
  if (convDesc == nullptr || groupCount < 1)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount",
                "convDesc is NULL or groupCount < 1 (" + std::to_string(groupCount) + ")");
  convDesc->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                            int* groupCount) {
  if (convDesc == nullptr || groupCount == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolutionGroupCount", "a NULL pointer");
  *groupCount = convDesc->groups;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  const char* fn = "cudnnSetConvolution2dDescriptor";
  if (convDesc == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "convDesc is NULL");
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "padding must be >= 0 and strides and dilations > 0 (pad " +
                    std::to_string(pad_h) + "x" + std::to_string(pad_w) + ", stride " +
                    std::to_string(u) + "x" + std::to_string(v) + ", dilation " +
                    std::to_string(dilation_h) + "x" + std::to_string(dilation_w) + ")");
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown mode " + std::to_string(mode));
  if (!loom_emu::cudnn::is_known(computeType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "unknown compute type " + std::to_string(computeType));
  convDesc->pad[0] = pad_h, convDesc->pad[1] = pad_w;
  convDesc->stride[0] = u, convDesc->stride[1] = v;
  convDesc->dilation[0] = dilation_h, convDesc->dilation[1] = dilation_w;
  convDesc->mode = mode;
  convDesc->compute = computeType;
  convDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t convDesc,
                                              int* pad_h, int* pad_w, int* u, int* v,
                                              int* dilation_h, int* dilation_w,
                                              cudnnConvolutionMode_t* mode,
                                              cudnnDataType_t* computeType) {
  if (convDesc == nullptr || !convDesc->set || pad_h == nullptr || pad_w == nullptr ||
      u == nullptr || v == nullptr || dilation_h == nullptr || dilation_w == nullptr ||
      mode == nullptr || computeType == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolution2dDescriptor",
                "a NULL pointer or an unset descriptor");
  *pad_h = convDesc->pad[0], *pad_w = convDesc->pad[1];
  *u = convDesc->stride[0], *v = convDesc->stride[1];
  *dilation_h = convDesc->dilation[0], *dilation_w = convDesc->dilation[1];
  *mode = convDesc->mode;
  *computeType = convDesc->compute;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int* n, int* c, int* h, int* w) {
  const char* fn = "cudnnGetConvolution2dForwardOutputDim";
  using namespace loom_emu::cudnn;
  if (convDesc == nullptr || inputTensorDesc == nullptr || filterDesc == nullptr ||
      !convDesc->set || !inputTensorDesc->set || !filterDesc->set || n == nullptr ||
      c == nullptr || h == nullptr || w == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "a NULL pointer or an unset descriptor");
  const Dims4& x = inputTensorDesc->dims;
  const Dims4& f = filterDesc->dims;
  if (f.d[1] * convDesc->groups != x.d[1])
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the filter's input channels times the group count differ from the input's");
  const int64_t p = out_size(x.d[2], convDesc->pad[0], f.d[2], convDesc->stride[0],
                             convDesc->dilation[0]);
  const int64_t q = out_size(x.d[3], convDesc->pad[1], f.d[3], convDesc->stride[1],
                             convDesc->dilation[1]);
  if (p <= 0 || q <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "the dilated filter does not fit the padded input");
  *n = static_cast<int>(x.d[0]);
  *c = static_cast<int>(f.d[0]);
  *h = static_cast<int>(p);
  *w = static_cast<int>(q);
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
