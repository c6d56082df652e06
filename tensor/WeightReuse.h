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

#include "tensor/Device.h"
#include "tensor/ThreadLocalMode.h"

namespace loom {

struct WeightReuse : ThreadLocalMode<WeightReuse, /*kEnabledByDefault=*/false> {};

// Reuses reordered weights until the end of the scope (see above).
class WeightReuseGuard : public ModeGuard<WeightReuse> {
 public:
  explicit WeightReuseGuard(bool enabled = true) : ModeGuard(enabled) {}
};

// Makes, ahead of the passes that will read them, the weight copies those
// passes keep on `device`: for every weight a kept copy was read of since
// the last call and that has been written since (the optimizer step), the
// copy of its current version.  A pipeline stage that waits for its first
// micro-batch runs this on its stream first, so a step's new copies are
// made in the time it would idle, not in its first micro-batch's passes
// (pipeline::Pipe and the ResNet-50 pipelines do, under WeightReuse).
// Returns how many copies it made; 0 for a device without kept copies.
int prepare_kept_weights(Device device);

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
// Kernels that keep weight copies register how to prepare them
// (prepare_kept_weights runs every one registered).
void register_kept_weight_preparer(int (*prepare)(Device));
}  // namespace detail

}  // namespace loom
