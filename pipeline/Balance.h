// Balance helpers: how many consecutive layers of a Sequential each pipeline
// stage should hold (PipeOptions::balance), from one profile of a sample.
//
// Both profile every layer once, feeding the sample through the layers in
// order on the layers' current devices (the sample is moved to each layer's
// device, taken from its first parameter or buffer; parameter-free layers keep
// the previous device), without recording autograd history and without
// changing parameters (batch-norm layers run in eval mode for the profile, so
// running statistics are untouched).  Then partition_costs() picks the
// contiguous split that minimises the most expensive stage.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/modules/Container.h"
#include "tensor/Tensor.h"

namespace loom {
namespace pipeline {

// The contiguous partition of `costs` (one per layer, >= 0) into `num_stages`
// non-empty groups whose largest sum is smallest (ties: the earliest such
// split).  Returns the group sizes.  Throws when num_stages < 1, there are
// fewer costs than stages, or a cost is negative or not finite.
std::vector<int64_t> partition_costs(const std::vector<double>& costs, int64_t num_stages);

// Per-layer forward wall time (seconds) of `sample`, the best of `repeats`
// runs after one warm-up run.
std::vector<double> profile_times(const nn::Sequential& sequential, const Tensor& sample,
                                  int repeats = 1);
// Per-layer bytes: param_scale x the layer's parameter bytes (2 = weights and
// their gradients; 3-4 with optimizer state) plus the bytes of its output
// activation for `sample`.
std::vector<double> profile_sizes(const nn::Sequential& sequential, const Tensor& sample,
                                  double param_scale = 2.0);

// balance for Pipe by forward time / by memory.  Throws as partition_costs and
// when the sample is undefined or the Sequential is empty.
std::vector<int64_t> balance_by_time(const nn::Sequential& sequential, const Tensor& sample,
                                     int64_t num_stages);
std::vector<int64_t> balance_by_size(const nn::Sequential& sequential, const Tensor& sample,
                                     int64_t num_stages, double param_scale = 2.0);

}  // namespace pipeline
}  // namespace loom
