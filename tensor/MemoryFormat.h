// How a dense 4-D (N, C, H, W) tensor lays out its values, as PyTorch's
// torch.memory_format: contiguous (NCHW, row-major) or channels last (NHWC
// in memory: the C values of one pixel side by side, strides
// (H*W*C, 1, W*C, C)).  The shape stays (N, C, H, W) either way; only the
// strides differ, so every op accepts both.
//
// Convolutions that run in oneDNN on the CPU read and write channels last
// without reordering (tensor/native/Convolution.h); batch norm and the
// elementwise ops keep it, so a network's activations stay channels last
// between convolutions.
#pragma once

#include "tensor/ShapeUtil.h"

namespace loom {

enum class MemoryFormat {
  kContiguous,   // row-major
  kChannelsLast  // 4-D only: (N, C, H, W) stored as NHWC
};

const char* memory_format_name(MemoryFormat format);

// kChannelsLast when channels_last is set, else kContiguous: for the
// kernels' layout flags (ConvGeometry, BatchNormShape, PoolGeometry).
inline MemoryFormat channels_last_if(bool channels_last) {
  return channels_last ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous;
}

// The strides of a dense tensor of `sizes` in `format` (throws for channels
// last unless sizes has 4 dims).
IntList strides_for(const IntList& sizes, MemoryFormat format);

// Whether sizes/strides describe a dense tensor in `format`.  Dims of size 1
// may have any stride, so a tensor can be both (C == 1, or H == W == 1).
bool is_dense_in(const IntList& sizes, const IntList& strides, MemoryFormat format);

}  // namespace loom
