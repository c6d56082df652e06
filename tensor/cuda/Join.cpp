// The CUDA kernel of native::cat (Join.h): each input is copied, converted
// to the output's dtype where it differs, straight into its slice of the
// output by the CUDA copy kernel (any strides), on the device's current
// stream.  The CPU's kernel packs contiguous copies instead; on a GPU that
// would be an extra pass over every input.
#include "tensor/native/Copy.h"
#include "tensor/native/Join.h"
#include "tensor/native/Views.h"

namespace loom {
namespace cuda {
namespace {

void cat_kernel(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    const int64_t n = t.sizes()[dim];
    if (n > 0) native::copy_(native::narrow(out, dim, offset, n), t);
    offset += n;
  }
}

}  // namespace

static const native::RegisterKernel reg_cat(native::cat_stub, kCUDA, &cat_kernel);

}  // namespace cuda
}  // namespace loom
