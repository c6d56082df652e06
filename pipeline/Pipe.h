// pipeline::Pipe: a Sequential split into stages over devices, run as a
// micro-batch pipeline (GPipe, Huang et al. 2019; 1F1B as in PipeDream-flush).
//
// Placement: stage s holds `balance[s]` consecutive layers of the Sequential
// and lives on `devices[s]`; the constructor moves those layers there
// (module->to, in place: the user's handles stay valid).  Empty balance means
// an even split (the first L % S stages get one layer more).
//
// Forward (both schedules): the batch is split along dim 0 into micro-batches
// (`chunks` pieces like Tensor::chunk, or pieces of `split_size` rows; the
// last may be smaller).  Stage s of micro-batch i runs on devices[s]'s
// default (compute) stream; the hand-over `.to(devices[s+1])` runs on
// devices[s+1]'s copy stream after an event recorded on stage s's stream, and
// stage s+1's stream waits on the copy's event.  So while stage 1 computes
// micro-batch i, stage 0 already computes micro-batch i+1.  The micro-batch
// outputs are concatenated on the last device.  All of it records autograd
// history (the streams carry GradMode), so the output's backward is pipelined
// as well: the engine runs each device's nodes on that device's thread, and
// the micro-batches' graphs are independent.
//
// train_step(inputs, targets, loss_fn) runs forward, loss and backward:
//   GPipe (fill-drain): forward of every micro-batch, then loss_fn on the
//     whole concatenated output, then one backward.  Peak memory: the
//     activations of all micro-batches.
//   OneFOneB: loss_fn on each micro-batch's output, scaled by the micro-batch's
//     share of the batch (rows_i / rows), and its own backward.  The forward of
//     micro-batch i+S-1 (S = stages) is submitted to the stage streams before
//     the backward of micro-batch i runs on the calling thread (and the
//     engine's device threads), so forwards overlap backwards, and at most S
//     micro-batches' activations are alive at once (after a micro-batch's
//     backward its graph is freed).  With a loss that is a mean over rows
//     (MSELoss, CrossEntropyLoss with mean reduction) the returned loss and the
//     accumulated gradients equal the whole-batch ones.
//   Gradients accumulate into .grad (call zero_grad() between steps, as
//   usual); the returned loss is detached, on the last device.
//
// Deferred weight gradients (defer_weight_gradients, on by default): the
// stages record their conv2d and linear backward split in two
// (autograd/DeferWeightGrad.h).  Each device then passes a micro-batch's
// input gradient to the stage before it first and computes weight gradients
// when it would otherwise wait (the drain bubble), one product per layer over
// all micro-batches whose weight gradients are waiting.  The gradients are
// the same; until they run, the weight halves keep their output gradients
// and inputs alive (with 1F1B, at most until the end of that micro-batch's
// backward).
//
// BatchNorm inside a pipe normalises each micro-batch with that micro-batch's
// statistics.  By default the running statistics are updated once per
// micro-batch (as torchgpipe without deferred_batch_norm).  With
// deferred_batch_norm(true) they are updated once per mini-batch with the
// statistics of the whole mini-batch, exactly as one BatchNorm forward over
// the whole batch would (pipeline/DeferredBatchNorm.h; every BatchNorm layer,
// nested ones too, is redirected through BatchNormBase::forward_to while the
// pipe exists; one already redirected, e.g. a SyncBatchNorm, throws).
// Weight reuse (reuse_weights, on by default): the stages run under
// WeightReuseGuard (tensor/WeightReuse.h), so a convolution whose kernel reads
// its weights in a layout of its own reorders them once per step, not once
// per micro-batch.  Change weights between steps only through tensor ops
// (the optimizer does), not through raw data pointers.
// Checkpointing (as torchgpipe): with Checkpoint::kAlways every stage of
// every micro-batch runs through autograd::checkpoint (autograd/Checkpoint.h):
// its forward keeps no activations but the stage's input, and its backward
// recomputes the stage first; kExceptLast does so for all micro-batches but
// the last (whose backward starts at once, so recomputing it would only add
// time); kNever keeps every activation.  Outputs, loss, gradients and
// BatchNorm running statistics equal the un-checkpointed pipe's; dropout
// draws the same masks in the forward and the recomputation.
//
// Devices: CPU logical devices (cpu:0, cpu:1, ...) and CUDA devices (cuda:0,
// cuda:1, ...; one GPU may appear twice), mixed as you like.  On a CUDA
// device the same streams are CUDA streams (tensor/Stream.h): each stage's
// closure runs on its stream's launcher thread and only queues kernels, so
// the stages' launchers and the GPUs run concurrently; the hand-over copy
// goes on the consumer's copy stream, ordered by CUDA events (and its memory
// is recorded on the consumer's compute stream).  Stages on the same GPU
// share its default stream, so there they run one after the other (the
// pipeline still works, as in the model-parallel tutorial on one GPU).  An
// unusable CUDA device (no GPU, bad index, built without CUDA) throws.
//
// Errors (loom::Error): no devices, balance of another length than devices,
// a balance entry < 1, a balance not summing to the number of layers, more
// devices than layers, chunks or split_size <= 0, both chunks > 1 and
// split_size set, an undefined or 0-d input, a stage returning a tensor on the
// wrong device (named: stage, its layers, devices, micro-batch), and any
// error inside a stage (the message names the stream, stage and micro-batch).
#pragma once

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/Module.h"
#include "nn/ModuleHolder.h"
#include "nn/modules/BatchNorm.h"
#include "nn/modules/Container.h"
#include "pipeline/DeferredBatchNorm.h"
#include "tensor/Device.h"
#include "tensor/Tensor.h"

namespace loom {
namespace pipeline {

enum class Schedule { kGPipe, kOneFOneB };
enum class Checkpoint { kNever, kExceptLast, kAlways };

struct PipeOptions {
  PipeOptions() = default;
  explicit PipeOptions(std::vector<Device> devices) : devices_(std::move(devices)) {}
  // One device per stage.
  PipeOptions& devices(std::vector<Device> v) { devices_ = std::move(v); return *this; }
  // Layers per stage; empty = even split over the devices.
  PipeOptions& balance(std::vector<int64_t> v) { balance_ = std::move(v); return *this; }
  // Number of micro-batches (like Tensor::chunk: ceil(rows / chunks) rows each,
  // fewer pieces when rows < chunks).
  PipeOptions& chunks(int64_t v) { chunks_ = v; return *this; }
  // Rows per micro-batch instead (the last may be smaller); unset = chunks.
  PipeOptions& split_size(int64_t v) { split_size_ = v; return *this; }
  // Validation happens in Pipe's constructor (setters never throw).
  PipeOptions& schedule(Schedule v) { schedule_ = v; return *this; }
  PipeOptions& checkpoint(Checkpoint v) { checkpoint_ = v; return *this; }
  PipeOptions& deferred_batch_norm(bool v) { deferred_batch_norm_ = v; return *this; }
  PipeOptions& defer_weight_gradients(bool v) { defer_weight_gradients_ = v; return *this; }
  PipeOptions& reuse_weights(bool v) { reuse_weights_ = v; return *this; }

  std::vector<Device> devices_;
  std::vector<int64_t> balance_;
  int64_t chunks_ = 1;
  std::optional<int64_t> split_size_;
  Schedule schedule_ = Schedule::kGPipe;
  Checkpoint checkpoint_ = Checkpoint::kNever;
  bool deferred_batch_norm_ = false;
  bool defer_weight_gradients_ = true;
  bool reuse_weights_ = true;
};

// loss_fn(output, target) -> a one-element loss (a mean over rows for the
// 1F1B gradients to equal the whole-batch ones).
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

class PipeImpl : public nn::Module {
 public:
  // Splits `sequential` into stages and moves them to their devices.  The
  // stages share the Sequential's layers.  Throws as listed above.
  PipeImpl(nn::Sequential sequential, PipeOptions options);

  // (N, ...) on any device -> the concatenated output on the last device.
  Tensor forward(const Tensor& input) override;

  // Forward, loss and backward by the schedule (see above); returns the
  // loss of the whole batch, detached, on the last device.  targets: (N, ...)
  // split like inputs; throws when their row count differs or grad mode is
  // off.
  Tensor train_step(const Tensor& inputs, const Tensor& targets, const LossFn& loss_fn);

  // The micro-batches `input` is split into (views, or differentiable
  // slices of it).  Throws on an undefined or 0-d input.
  std::vector<Tensor> split(const Tensor& input) const;

  int64_t num_stages() const { return static_cast<int64_t>(stages_.size()); }
  const std::vector<nn::Sequential>& stages() const { return stages_; }
  const std::vector<Device>& devices() const { return options_.devices_; }
  const std::vector<int64_t>& balance() const { return balance_; }
  const PipeOptions& options() const { return options_; }

  ~PipeImpl() override;

  // A pipe places its stages itself: moving it to one device throws.
  void to(Device device, bool non_blocking = false) override;
  using nn::Module::to;
  void pretty_print(std::ostream& out) const override;

 private:
  struct Run;  // one forward over the micro-batches
  // Stages after the first wait for their first micro-batch: under weight
  // reuse they make their layers' weight copies for this step meanwhile
  // (prepare_kept_weights, tensor/WeightReuse.h).
  void prepare_waiting_stages() const;
  // Submits micro-batch `index`'s stages (and, when loss_fn, its scaled
  // loss on the last stage) to the streams.
  void submit_micro_batch(Run& run, size_t index, const LossFn* loss_fn) const;
  // Waits for every stream; rethrows the first error (stage order).
  void synchronize_all() const;
  // After a pass failed: lets every closure still queued (they write into
  // the pass's Run) finish, ignoring their errors, and ends the deferred
  // batch norms' pass; the caller rethrows the first error.
  void abandon_pass() const;
  // Whether micro-batch i of `micro_batches` runs its stages checkpointed.
  bool checkpointed(size_t i, size_t micro_batches) const;
  // Tells the deferred batch norms how many micro-batches a pass has (0: none).
  void begin_deferred(int64_t micro_batches) const;

  PipeOptions options_;
  std::vector<int64_t> balance_;
  std::vector<int64_t> first_layer_;  // index of each stage's first layer
  std::vector<nn::Sequential> stages_;
  std::vector<std::pair<nn::BatchNormBase*, std::shared_ptr<DeferredBatchNormImpl>>> deferred_;
};

LOOM_MODULE(Pipe);

}  // namespace pipeline
}  // namespace loom
