// Helpers to evaluate a data-parallel model: every rank scores its own shard
// of the test set, then the ranks combine their results.
#pragma once

#include "distributed/ProcessGroup.h"
#include "tensor/Tensor.h"

namespace loom {
namespace distributed {

// Concatenates every rank's `tensor` along dim 0 in rank order; every rank
// gets the whole result.  Ranks may hold different numbers of rows (zero
// included), but must agree on dtype and on the other dims (a loom::Error
// says which rank differs).  Sizes are gathered first, rows padded to the
// longest, all-gathered, then trimmed.  A null group returns `tensor` itself.
// Collective.
Tensor all_gather_concat(const Tensor& tensor, const ProcessGroupPtr& group);

// The mean of `value` over the ranks (e.g. a loss or an accuracy).  A null
// group returns value.  Collective.
double all_reduce_mean(double value, const ProcessGroupPtr& group);

}  // namespace distributed
}  // namespace loom
