// CUDA reduction launchers on raw pointers, for tensor/cuda/Reduce.cpp.
//
// Every reduction reads a contiguous (outer, reduce, inner) block `src` (a
// native::ReduceView) and writes outer * inner outputs in row-major (outer,
// inner) order: output (o, i) reduces src[o, :, i].  Plain C++ declarations;
// the kernels are in Reduce.cu.
//
// When the outputs are too few to fill the GPU the reduced axis is cut into
// chunks (ReducePlan.h) whose partial results need `scratch`: device memory of
// reduce_scratch_bytes bytes (null when that is 0), free for reuse once the
// queued kernels have run.
//
// Each call queues kernels on stream `stream` (a cudaStream_t as an integer, 0
// for the legacy default stream) of CUDA device `device`, checks the launch
// and returns without waiting.  Throws loom::Error on a CUDA error.
#pragma once

#include <cstdint>

#include "tensor/DType.h"

namespace loom {
namespace cuda {

// Bytes of scratch a reduction of this block needs on `device` (0: none).
constexpr int64_t kReducePartialBytes = 16;  // one chunk's partial result
int64_t reduce_scratch_bytes(int64_t outer, int64_t reduce, int64_t inner, int device);

// out = the sum (or mean) over the reduced axis.  src holds `dtype`; out holds
// `dtype` for float32/float64 (accumulated in double), int64 for the integer
// dtypes and bool (accumulated in int64).  An empty reduced axis gives 0 (nan
// for the mean).
void sum(DType dtype, const void* src, void* out, int64_t outer, int64_t reduce, int64_t inner,
         bool mean, void* scratch, int device, uint64_t stream);

// values (of `dtype`) and indices (int64) of the max or min over the reduced
// axis (reduce >= 1); either output may be null.  NaN wins; of equal values
// the first (lowest index) wins, as on the CPU.
void extremum(DType dtype, const void* src, void* values, int64_t* indices, int64_t outer,
              int64_t reduce, int64_t inner, bool is_max, void* scratch, int device,
              uint64_t stream);

}  // namespace cuda
}  // namespace loom
