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
  // Everything travels on the device the group communicates on (input's own
  // device, or its GPU under nccl); the result comes back to input's device.
  const Device on = group->device_for(input.device());
  Tensor mine = tensor(header, {h}, TensorOptions(kInt64)).to(on);
  Tensor all = zeros({n * h}, TensorOptions(kInt64).device(on));
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
  Tensor padded = zeros(padded_shape, TensorOptions(input.dtype()).device(on));
  if (input.size(0) > 0) padded.narrow(0, 0, input.size(0)).copy_(input);
  IntList out_shape = padded_shape;
  out_shape[0] = longest * n;
  Tensor gathered = zeros(out_shape, TensorOptions(input.dtype()).device(on));
  group->all_gather_into_tensor(gathered, padded)->wait();
  // Drop each rank's padding: copy the real rows together (copies exist on
  // every device, cat need not).
  int64_t total = 0;
  for (int r = 0; r < n; ++r) total += headers[r * h];
  IntList result_shape = input.sizes();
  result_shape[0] = total;
  Tensor result = empty(result_shape, TensorOptions(input.dtype()).device(on));
  int64_t at = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t rows = headers[r * h];
    if (rows == 0) continue;
    result.narrow(0, at, rows).copy_(gathered.narrow(0, r * longest, rows));
    at += rows;
  }
  return result.to(input.device());
}

double all_reduce_mean(double value, const ProcessGroupPtr& group) {
  if (!group) return value;
  Tensor t = full({1}, value, TensorOptions(kFloat64).device(group->device_for(Device(kCPU))));
  group->all_reduce(t, ReduceOp::Sum)->wait();
  return t.item<double>() / static_cast<double>(group->size());
}

}  // namespace distributed
}  // namespace loom
