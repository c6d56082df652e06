// PipelineParallelResNet50: ModelParallelResNet50 with each batch split into
// micro-batches of split_size images, so stage 2 of micro-batch i (device1)
// runs while stage 1 of micro-batch i+1 (device0) is computed — the
// tutorial's PipelineParallelResNet50.
//
//   PipelineParallelResNet50 model(20);            // split_size 20
//   Tensor logits = model(images);                 // cat of the micro-batches
//
// How the overlap happens on CPU logical devices: forward ops run on the
// thread that calls them, so each stage's work is submitted as a closure to
// its device's default (compute) stream (tensor/Stream.h), one worker thread
// per device.  Stage 1 of micro-batch i goes on device0's stream; an event
// recorded after it makes device1's stream wait; then device1's stream copies
// the features over (the hand-over copy on the consumer's compute stream, as
// `.to('cuda:1')` does in the tutorial) and runs stage 2.  The autograd
// history recorded by those closures is an ordinary graph: loss.backward()
// runs device1's nodes on the calling thread and device0's on its engine
// thread, so backward is pipelined as well.
//
// CUDA devices have no streams in loom yet: there the loop runs on the calling
// thread, exactly as the tutorial's Python code.
//
// Deferred weight gradients (on by default): the stages record their conv
// and linear backward split in two (autograd/DeferWeightGrad.h), so in
// backward each device hands the input gradient of a micro-batch on before
// computing that micro-batch's weight gradients, which fill the time it would
// otherwise wait.  Without it, device1 idles while device0 runs the backward
// of the last micro-batch (the drain bubble).  Same gradients either way.
//
// Same results: in eval mode the logits, loss and gradients equal those of the
// unsplit model for every split_size.  In training mode batch norm normalises
// each micro-batch with its own statistics (as in the tutorial) and updates its
// running statistics once per micro-batch.
#pragma once

#include <cstdint>
#include <vector>

#include "examples/model_parallel/ModelParallelResNet50.h"

namespace loom {
namespace examples {

class PipelineParallelResNet50Impl : public ModelParallelResNet50Impl {
 public:
  // Throws for split_size < 1 or num_classes < 1.
  explicit PipelineParallelResNet50Impl(int64_t split_size = 20, int64_t num_classes = 1000,
                                        Device device0 = Device(kCPU, 0),
                                        Device device1 = Device(kCPU, 1));

  // images (N, 3, H, W) on device0 -> logits (N, num_classes) on device1,
  // computed in ceil(N / split_size) micro-batches (the last may be smaller).
  // Throws as ModelParallelResNet50::forward; an error inside a stage is
  // rethrown here (loom::Error naming the stream) once both stages stopped.
  Tensor forward(const Tensor& images) override;

  int64_t split_size() const { return split_size_; }
  // Throws for split_size < 1.
  void set_split_size(int64_t split_size);
  bool defer_weight_gradients() const { return defer_weight_gradients_; }
  void set_defer_weight_gradients(bool defer) { defer_weight_gradients_ = defer; }
  // Whether the stages run under WeightReuseGuard (tensor/WeightReuse.h):
  // oneDNN's convolutions reorder their weights once per step instead of once
  // per micro-batch.  On by default.
  bool reuse_weights() const { return reuse_weights_; }
  void set_reuse_weights(bool reuse) { reuse_weights_ = reuse; }

 protected:
  // Checks images (as ModelParallelResNet50::forward) and splits them into
  // micro-batches of split_size along dim 0.
  std::vector<Tensor> split_images(const Tensor& images, const char* who) const;

 private:
  int64_t split_size_;
  bool defer_weight_gradients_ = true;
  bool reuse_weights_ = true;
};
LOOM_MODULE(PipelineParallelResNet50);

}  // namespace examples
}  // namespace loom
