// Process-wide switches of the CUDA backend, the counterparts of PyTorch's
// torch.backends.cuda.matmul.allow_tf32,
// torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction,
// torch.backends.cudnn.allow_tf32 and torch.backends.cudnn.benchmark, with
// PyTorch's defaults.  Plain C++, so
// every build (with or without CUDA) can set and read them; without CUDA they
// have no effect.  Reads and writes are atomic; a change applies to ops
// launched after it.
#pragma once

namespace loom {
namespace cuda {

// cuBLAS GEMMs in float32 may use TF32 tensor cores (10-bit mantissa inputs,
// float32 accumulation).  Default false, as in PyTorch >= 1.12.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

// cuBLAS GEMMs in float16 (bfloat16) may reduce partial sums in float16
// (bfloat16), as split-K kernels do, instead of float32 throughout.  Default
// true for both, as in PyTorch; false sets cuBLAS's
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION for those products.
void set_matmul_allow_fp16_reduced_precision_reduction(bool allow);
bool matmul_allow_fp16_reduced_precision_reduction();
void set_matmul_allow_bf16_reduced_precision_reduction(bool allow);
bool matmul_allow_bf16_reduced_precision_reduction();

// cuDNN convolutions in float32 may use TF32.  Default true, as in PyTorch.
void set_cudnn_allow_tf32(bool allow);
bool cudnn_allow_tf32();

// cuDNN convolutions time the available algorithms once per shape and keep
// the fastest (true), or take cuDNN's heuristic choice (false, the default).
void set_cudnn_benchmark(bool benchmark);
bool cudnn_benchmark();

// float16 and bfloat16 convolutions run channels last (NHWC activations,
// OHWI weights) in cuDNN, whose tensor-core kernels read that layout as it
// is and NCHW through transposes of their own.  Given a channels-last input
// they keep it (and return channels-last outputs, which batch norm, max
// pooling and the elementwise ops keep); nn::Conv2d::runs_channels_last, and
// so loom's ResNets, convert an NCHW input once.  Default true (PyTorch
// runs NCHW unless the model is put in torch.channels_last); false runs
// every CUDA convolution NCHW, as before.  Has no PyTorch counterpart.
void set_cudnn_channels_last(bool channels_last);
bool cudnn_channels_last();

}  // namespace cuda
}  // namespace loom
