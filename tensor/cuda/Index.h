// CUDA indexing launchers on raw pointers, for tensor/cuda/Index.cpp and
// IndexCheck.cpp (kernels in Index.cu):
// index_select / index_add over contiguous (outer, size, inner) blocks,
// gather / scatter_add over strided operands, and the device-side index check
// every indexing op runs first.
//
// Index buffers are int64.  The kernels never read or write out of bounds:
// an index outside its dim is skipped (the callers check first and throw).
// Each call queues kernels on stream `stream` of device `device` and returns
// without waiting.  Throws loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

constexpr int kMaxIndexDims = 16;

// verdict (two int64 of device memory) <- the lowest position i with idx[i]
// outside [0, limit) and != ignore (when has_ignore), and idx[i]; or -1 and 0
// when every value is fine.
void find_bad_index(const int64_t* idx, int64_t n, int64_t limit, bool has_ignore,
                    int64_t ignore, int64_t* verdict, int device, uint64_t stream);

// out (outer, n, inner) <- self (outer, size, inner) at idx (n); elements of
// element_size bytes (1, 2, 4 or 8), copied bit for bit.
void index_select(size_t element_size, const void* self, void* out, const int64_t* idx,
                  int64_t outer, int64_t size, int64_t n, int64_t inner, int device,
                  uint64_t stream);
// out (outer, size, inner) += source (outer, n, inner) at idx (n), with
// atomics (bool: logical or; uint8 wraps).  Float sums of repeated indices
// may round in any order.
void index_add(DType dtype, void* out, const void* source, const int64_t* idx, int64_t outer,
               int64_t size, int64_t n, int64_t inner, int device, uint64_t stream);

// Shapes and element strides for gather / scatter_add, passed by value.
struct IndexLayout {
  int ndim = 0;
  int dim = 0;                           // the indexed dim
  int64_t limit = 0;                     // self's (gather) or out's size along dim
  int64_t sizes[kMaxIndexDims] = {};     // the index tensor's shape
  int64_t strides[kMaxIndexDims] = {};   // self (gather) or out (scatter_add)
  int64_t src_strides[kMaxIndexDims] = {};  // src (scatter_add only)
};

// out (index's shape, contiguous)[p] = self[p with coordinate `dim` replaced
// by idx[p]]; idx contiguous of index's shape; self strided by l.strides.
void gather(size_t element_size, void* out, const void* self, const int64_t* idx,
            const IndexLayout& l, int device, uint64_t stream);
// out[p with coordinate `dim` replaced by idx[p]] += src[p] over index's
// shape; out strided by l.strides, src by l.src_strides, idx contiguous.
void scatter_add(DType dtype, void* out, const void* src, const int64_t* idx,
                 const IndexLayout& l, int device, uint64_t stream);

}  // namespace cuda
}  // namespace loom
