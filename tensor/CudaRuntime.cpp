// The CPU-only side of loom::cuda.  With CUDA (LOOM_WITH_CUDA) the runtime
// queries and kernels live in tensor/cuda/*.cu; without it this file supplies
// stubs with the same signatures, so callers never need #ifdefs: queries say
// "no device" and kernels throw loom::Error.
#include "tensor/CudaRuntime.h"

#include "tensor/Error.h"
#include "tensor/cuda/VectorAdd.h"

namespace loom {
namespace cuda {

#ifdef LOOM_WITH_CUDA

bool built_with_cuda() { return true; }

#else

bool built_with_cuda() { return false; }
int device_count() { return 0; }
bool is_available() { return false; }

void vector_add(const float*, const float*, float*, int64_t, int) {
  LOOM_FAIL("cuda::vector_add: loom was built without CUDA (no toolkit found, or "
            "LOOM_DISABLE_CUDA=1)");
}

#endif  // LOOM_WITH_CUDA

}  // namespace cuda
}  // namespace loom
