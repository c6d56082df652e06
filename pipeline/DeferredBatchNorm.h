// DeferredBatchNorm: batch norm inside a pipe whose running statistics cover
// the whole mini-batch, not each micro-batch (torchgpipe's deferred_batch_norm).
//
// In a Pipe every micro-batch is normalised with its own statistics (the
// gradients are those of per-micro-batch batch norm, as in torchgpipe).  With
// PipeOptions::deferred_batch_norm(true), the running mean and variance are not
// updated per micro-batch: this module accumulates each micro-batch's
// per-channel count, mean and squared deviations (Chan et al.'s parallel
// formula, in float64) and, after the last micro-batch of the mini-batch,
// updates running_mean / running_var (unbiased) and num_batches_tracked once,
// exactly as one BatchNorm forward over the whole mini-batch would.
//
// Pipe installs one per BatchNorm layer found anywhere in its layers (nested
// ones too) through BatchNormBase::forward_to, and removes it when the pipe
// goes away.  Outside a pipe pass (begin() not called), or in eval mode, or
// without running statistics, it behaves exactly like the wrapped BatchNorm.
#pragma once

#include <cstdint>

#include "nn/Module.h"
#include "nn/modules/BatchNorm.h"

namespace loom {
namespace pipeline {

class DeferredBatchNormImpl : public nn::Module {
 public:
  // bn: the layer whose tensors and options are used (not owned: the layer
  // owns this module through forward_to).
  explicit DeferredBatchNormImpl(nn::BatchNormBase* bn);
  Tensor forward(const Tensor& input) override;
  // Called by Pipe before a pass of `micro_batches` micro-batches (0 ends the
  // deferral: later calls behave like plain BatchNorm).
  void begin(int64_t micro_batches);

 private:
  nn::BatchNormBase* bn_;
  int64_t expected_ = 0;  // micro-batches in the current pass; 0 = not deferring
  int64_t seen_ = 0;
  double count_ = 0;
  Tensor mean_;  // (C) float64
  Tensor m2_;    // (C) float64: sum of squared deviations
};

}  // namespace pipeline
}  // namespace loom
