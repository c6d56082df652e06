#include "nn/parallel/ScatterGather.h"

#include "autograd/functions/Shape.h"
#include "tensor/Error.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace nn {
namespace parallel {

std::vector<std::vector<Tensor>> chunk_tensors(const std::vector<Tensor>& tensors,
                                               size_t devices, int64_t dim) {
  LOOM_CHECK(devices > 0, "DataParallel scatter: expected at least one device, got 0");
  LOOM_CHECK(!tensors.empty(), "DataParallel scatter: the inputs hold no tensor to split "
             "along dim ", dim, "; pass at least one tensor with a batch dimension");
  std::vector<std::vector<Tensor>> pieces;
  pieces.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    LOOM_CHECK(t.defined(), "DataParallel scatter: input tensor ", i, " is undefined");
    LOOM_CHECK(t.dim() > 0 && dim >= -t.dim() && dim < t.dim(), "DataParallel scatter: input "
               "tensor ", i, " ", t.describe(), " has no dimension ", dim, " to split along");
    if (t.size(dim) == 0) {
      pieces.push_back({t});  // nothing to split: one empty chunk
    } else {
      pieces.push_back(t.chunk(static_cast<int64_t>(devices), dim));
    }
    LOOM_CHECK(pieces[i].size() == pieces[0].size(), "DataParallel scatter: input tensor ", i,
               " ", t.describe(), " splits into ", pieces[i].size(), " chunks along dim ", dim,
               " but input tensor 0 ", tensors[0].describe(), " into ", pieces[0].size(),
               "; every tensor input must give the same number of chunks");
  }
  return pieces;
}

Tensor gather_tensors(const std::vector<Tensor>& outputs, Device device, int64_t dim) {
  LOOM_CHECK(!outputs.empty(), "DataParallel gather: no outputs to gather");
  const Tensor& first = outputs.front();
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    LOOM_CHECK(t.defined() == first.defined(), "DataParallel gather: replica ", k,
               " returned ", t.defined() ? t.describe() : std::string("an undefined tensor"),
               " but replica 0 ", first.defined() ? first.describe() : std::string("an undefined tensor"));
    if (!t.defined()) continue;
    LOOM_CHECK((t.dim() == 0) == (first.dim() == 0), "DataParallel gather: replica ", k,
               " returned ", t.describe(), " but replica 0 ", first.describe(),
               "; outputs must all be scalars or all have dimension ", dim);
    LOOM_CHECK(t.dim() == 0 || (dim >= -t.dim() && dim < t.dim()), "DataParallel gather: "
               "cannot concatenate along dim ", dim, ": replica ", k, " returned ", t.describe());
  }
  if (!first.defined()) return Tensor();
  std::vector<Tensor> moved;
  moved.reserve(outputs.size());
  for (const Tensor& t : outputs) moved.push_back(t.to(device));
  // One replica: its output as it is (no concatenation copy).
  if (first.dim() == 0) return moved.size() == 1 ? moved[0].unsqueeze(0) : stack(moved, 0);
  if (moved.size() == 1) return moved[0];
  return cat(moved, dim);
}

namespace detail {

void check_gather_lengths(const std::vector<size_t>& lengths) {
  for (size_t k = 1; k < lengths.size(); ++k)
    LOOM_CHECK(lengths[k] == lengths[0], "DataParallel gather: replica ", k, " returned ",
               lengths[k], " outputs in a vector but replica 0 returned ", lengths[0]);
}

}  // namespace detail
}  // namespace parallel
}  // namespace nn
}  // namespace loom
