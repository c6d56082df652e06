// CPU embedding kernels.  The backward splits the table's rows over threads:
// each thread scans all indices and adds only the rows it owns, so there are
// no write races and the sums come out in index order (deterministic).
#include <algorithm>
#include <cstring>

#include "tensor/Parallel.h"
#include "tensor/native/Embedding.h"

namespace loom {
namespace cpu {

void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t n = indices.numel();
  const int64_t D = weight.sizes()[1];
  const size_t row_bytes = static_cast<size_t>(D) * weight.element_size();
  const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
  const char* w = static_cast<const char*>(weight.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  parallel_for(0, n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(D, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i)
                   std::memcpy(o + i * row_bytes, w + idx[i] * row_bytes, row_bytes);
               });
}

void embedding_backward_kernel(const Tensor& grad_weight, const Tensor& grad,
                               const Tensor& indices) {
  dispatch_floating(grad.dtype(), "embedding_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = indices.numel();
    const int64_t V = grad_weight.sizes()[0], D = grad_weight.sizes()[1];
    const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
    const T* g = static_cast<const T*>(grad.data_ptr());  // (n, D)
    T* gw = static_cast<T*>(grad_weight.data_ptr());      // (V, D)
    // Small problems run on one thread (grain = V).
    const int64_t grain = n * D < kElementwiseGrain ? std::max<int64_t>(V, 1) : 1;
    parallel_for(0, V, grain, [&](int64_t vb, int64_t ve) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = idx[i];
        if (v < vb || v >= ve) continue;
        T* dst = gw + v * D;
        const T* src = g + i * D;
        for (int64_t d = 0; d < D; ++d) dst[d] += src[d];
      }
    });
  });
}

static const native::RegisterKernel reg_embedding(native::embedding_stub, kCPU, &embedding_kernel);
static const native::RegisterKernel reg_embedding_backward(native::embedding_backward_stub, kCPU,
                                                           &embedding_backward_kernel);

}  // namespace cpu
}  // namespace loom
