// Raw (non-differentiable) joins: cat and stack.  Argument checks, dtype
// promotion and output allocation here; the byte copying in the backend's
// kernel (tensor/cpu/Join.cpp; tensor/cuda/Join.cpp: one copy_ of each input
// into its slice, converting its dtype on the device).  The differentiable forms are loom::cat and
// loom::stack (autograd/functions/Shape.h).
#pragma once

#include <vector>

#include "tensor/Tensor.h"
#include "tensor/native/DispatchStub.h"

namespace loom {
namespace native {

// Concatenates along dim (negative dims count from the end).  All tensors sit
// on one device and agree on every other dim; the result has the promoted
// dtype of all inputs.  1-D tensors of shape [0] are skipped (PyTorch's legacy
// rule), so cat({empty, x}) is x's values.  Throws for an empty list, a
// device mismatch (naming both devices) or a shape mismatch (naming the entry).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// Joins equal-shaped tensors along a new dim `dim` (in [-rank-1, rank]).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Whether cat skips t (a 1-D tensor of shape [0]).
bool cat_skips(const Tensor& t);

// ---- kernels (one slot per device type) -----------------------------------------
// out = cat(inputs, dim): out is contiguous; every input is of out's device
// type (CPU inputs may sit on other CPU logical devices: host memory is
// shared) and of out's shape except along dim, of any dtype and layout (the
// kernel converts: the CPU's first makes each contiguous in out's dtype on
// its own device, CUDA's copies each straight into its slice, converting on
// the device).
using CatKernel = void (*)(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim);
extern DispatchStub<CatKernel> cat_stub;

}  // namespace native
}  // namespace loom
