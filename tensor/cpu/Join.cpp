// CPU kernel for native::cat.  With contiguous inputs the output is `outer`
// rows (the dims before `dim`), and each row is the inputs' rows laid side by
// side, so the whole join is a list of memcpys: one per (row, input).  They
// run in parallel; a single huge block (outer == 1) is itself split.
#include <algorithm>
#include <cstring>

#include "tensor/Parallel.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Join.h"

namespace loom {
namespace cpu {

namespace {

// cat of inputs already contiguous in out's dtype.
void cat_contiguous(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  const int64_t es = static_cast<int64_t>(out.element_size());
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.sizes()[d];
  int64_t inner = 1;  // elements per unit of `dim`
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.sizes()[d];
  const int64_t out_row = out.sizes()[dim] * inner * es;  // bytes

  // (input, byte offset in an output row, bytes per row) for each input.
  struct Part {
    const char* src;
    int64_t offset;
    int64_t bytes;
  };
  std::vector<Part> parts;
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    const int64_t bytes = t.sizes()[dim] * inner * es;
    if (bytes > 0) parts.push_back({static_cast<const char*>(t.data_ptr()), offset, bytes});
    offset += bytes;
  }
  if (parts.empty() || outer == 0) return;
  char* dst = static_cast<char*>(out.data_ptr());

  constexpr int64_t kBlockGrain = 1 << 18;  // bytes a thread should copy at least
  if (outer == 1) {
    for (const Part& p : parts)
      parallel_for(0, p.bytes, kBlockGrain, [&](int64_t b, int64_t e) {
        std::memcpy(dst + p.offset + b, p.src + b, e - b);
      });
    return;
  }
  const int64_t tasks = outer * static_cast<int64_t>(parts.size());
  const int64_t grain = std::max<int64_t>(1, kBlockGrain / std::max<int64_t>(out_row, 1));
  parallel_for(0, tasks, grain, [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t row = task / static_cast<int64_t>(parts.size());
      const Part& p = parts[task % static_cast<int64_t>(parts.size())];
      std::memcpy(dst + row * out_row + p.offset, p.src + row * p.bytes, p.bytes);
    }
  });
}

void cat_kernel(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  std::vector<Tensor> parts;
  parts.reserve(inputs.size());
  for (const Tensor& t : inputs)
    parts.push_back(native::contiguous(native::to(t, t.device(), out.dtype())));
  cat_contiguous(out, parts, dim);
}

}  // namespace

static const native::RegisterKernel reg_cat(native::cat_stub, kCPU, &cat_kernel);

}  // namespace cpu
}  // namespace loom
