#include "distributed/parallel/Evaluation.h"

#include <vector>

#include "autograd/GradMode.h"
#include "autograd/functions/Shape.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace distributed {

Tensor all_gather_concat(const Tensor& input, const ProcessGroupPtr& group) {
  LOOM_CHECK(input.defined() && input.dim() >= 1, "all_gather_concat: expected a tensor with at "
             "least one dim, got ", input.defined() ? input.describe() : std::string("undefined"));
  if (!group) return input;
  autograd::NoGradGuard no_grad;
  const int n = group->size();
  // Header: rows, dtype, dims, then the trailing sizes (up to 8 dims).
  constexpr int64_t kMaxDims = 8;
  LOOM_CHECK(input.dim() <= kMaxDims, "all_gather_concat: at most ", kMaxDims,
             " dims are supported, got ", input.describe());
  std::vector<int64_t> header(3 + kMaxDims, 0);
  header[0] = input.size(0);
  header[1] = static_cast<int64_t>(input.dtype());
  header[2] = input.dim();
  for (int64_t d = 1; d < input.dim(); ++d) header[2 + d] = input.size(d);
  const int64_t h = static_cast<int64_t>(header.size());
  Tensor mine = tensor(header, {h}, TensorOptions(kInt64));
  Tensor all = zeros({n * h}, kInt64);
  group->all_gather_into_tensor(all, mine)->wait();
  const std::vector<int64_t> headers = all.to_vector<int64_t>();
  int64_t longest = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t* row = headers.data() + r * h;
    for (int64_t k = 1; k < h; ++k) {
      if (row[k] == header[k]) continue;
      IntList theirs(row + 3, row + 2 + std::max<int64_t>(row[2], 1));
      LOOM_FAIL("all_gather_concat: rank ", r, " has a ",
                dtype_name(static_cast<DType>(row[1])), " tensor of ", row[2],
                " dims with trailing sizes ", shape_str(theirs), ", but rank ", group->rank(),
                " has ", input.describe(), "; every rank must agree on dtype and on all dims but 0");
    }
    longest = std::max(longest, row[0]);
  }
  IntList padded_shape = input.sizes();
  padded_shape[0] = longest;
  Tensor padded = zeros(padded_shape, TensorOptions(input.dtype()).device(input.device()));
  if (input.size(0) > 0) padded.narrow(0, 0, input.size(0)).copy_(input);
  IntList out_shape = padded_shape;
  out_shape[0] = longest * n;
  Tensor gathered = zeros(out_shape, TensorOptions(input.dtype()).device(input.device()));
  group->all_gather_into_tensor(gathered, padded)->wait();
  std::vector<Tensor> parts;
  for (int r = 0; r < n; ++r) {
    const int64_t rows = headers[r * h];
    if (rows > 0) parts.push_back(gathered.narrow(0, r * longest, rows));
  }
  if (parts.empty()) {
    IntList empty_shape = input.sizes();
    empty_shape[0] = 0;
    return zeros(empty_shape, TensorOptions(input.dtype()).device(input.device()));
  }
  return cat(parts, 0);
}

double all_reduce_mean(double value, const ProcessGroupPtr& group) {
  if (!group) return value;
  Tensor t = full({1}, value, kFloat64);
  group->all_reduce(t, ReduceOp::Sum)->wait();
  return t.item<double>() / static_cast<double>(group->size());
}

}  // namespace distributed
}  // namespace loom
