// Weight reuse across calls: the micro-batch pipeline's promise that the
// weights its layers read do not change between the micro-batches of a step.
//
// oneDNN's fast convolution kernels read their weights in a blocked layout
// of their own, so every pass first reorders the weights into it: for a
// layer with large weights and a small batch (ResNet-50's last stages at 4
// images) the reorder costs as much as the convolution.  A pipeline runs
// each layer once per micro-batch with the same weights, so it reorders the
// same weights 8 or 16 times a step.  While a WeightReuseGuard is alive on a
// thread (and in the closures that thread submits to streams, which carry the
// mode like GradMode; convolutions recorded under it keep it for their
// backward), a convolution keeps its reordered weights, keyed by the weight
// tensor's identity, its version counter and the layout, and later passes
// reading the same weight at the same version in the same layout use that
// copy.  An in-place write through loom's ops bumps the version (the
// optimizer step, copy_, fill_, add_), so the next pass reorders again.
// Writes through a raw data pointer do not: under the guard, change weights
// only through tensor ops.  Off by default: a single-device step reads each
// weight once per pass and would only hold the copies.
#pragma once

#include <cstdint>

#include "tensor/ThreadLocalMode.h"

namespace loom {

struct WeightReuse : ThreadLocalMode<WeightReuse, /*kEnabledByDefault=*/false> {};

// Reuses reordered weights until the end of the scope (see above).
class WeightReuseGuard : public ModeGuard<WeightReuse> {
 public:
  explicit WeightReuseGuard(bool enabled = true) : ModeGuard(enabled) {}
};

// How often kernels reused a kept weight copy and how often they made one,
// since the process started (for tests and benchmarks).
struct WeightReuseStats {
  int64_t reused = 0, made = 0;
};
WeightReuseStats weight_reuse_stats();

namespace detail {
// Kernels count here (reused: a kept copy served the pass; made: a copy was
// reordered and kept).
void count_weight_reuse(bool reused);
}  // namespace detail

}  // namespace loom
