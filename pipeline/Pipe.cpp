#include "pipeline/Pipe.h"

#include <algorithm>
#include <exception>
#include <ostream>

#include "autograd/Checkpoint.h"
#include "autograd/Engine.h"
#include "autograd/DeferWeightGrad.h"
#include "tensor/WeightReuse.h"
#include "autograd/GradMode.h"
#include "autograd/functions/Functions.h"
#include "nn/modules/BatchNorm.h"
#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"
#include "tensor/Stream.h"

namespace loom {
namespace pipeline {

namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

std::string list_str(const std::vector<Device>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

}  // namespace

// The tensors of one pass over the micro-batches.  Written by the stream
// workers (each slot by exactly one closure), read after the events that
// order them; it must outlive all submitted work (every caller synchronizes
// all streams before it goes).
struct PipeImpl::Run {
  std::vector<Tensor> inputs;                // [m] micro-batches, caller's device
  std::vector<Tensor> targets;               // [m] (train_step), caller's device
  std::vector<double> weights;               // [m] rows_i / rows
  std::vector<std::vector<Tensor>> handed;   // [S][m] stage s's input, on devices[s]
  std::vector<std::vector<Tensor>> outputs;  // [S][m] stage s's output, on devices[s]
  std::vector<Tensor> losses;                // [m] scaled micro-batch losses (1F1B)
  std::vector<Event> done;                   // [m] last stage finished micro-batch i

  Run(std::vector<Tensor> micro, size_t stages) : inputs(std::move(micro)) {
    const size_t m = inputs.size();
    handed.assign(stages, std::vector<Tensor>(m));
    outputs.assign(stages, std::vector<Tensor>(m));
    losses.resize(m);
    done.resize(m);
    int64_t rows = 0;
    for (const Tensor& t : inputs) rows += t.size(0);
    for (const Tensor& t : inputs) weights.push_back(static_cast<double>(t.size(0)) / rows);
  }
  void release(size_t i) {
    for (auto& stage : handed) stage[i] = Tensor();
    for (auto& stage : outputs) stage[i] = Tensor();
    losses[i] = Tensor();
  }
};

PipeImpl::PipeImpl(nn::Sequential sequential, PipeOptions options)
    : nn::Module("Pipe"), options_(std::move(options)) {
  LOOM_CHECK(!sequential.is_empty(), "Pipe: the Sequential is an empty holder");
  const int64_t layers = static_cast<int64_t>(sequential->size());
  const auto& devices = options_.devices_;
  const int64_t n_stages = static_cast<int64_t>(devices.size());
  LOOM_CHECK(layers > 0, "Pipe: the Sequential has no layers");
  LOOM_CHECK(n_stages > 0, "Pipe: expected at least one device in PipeOptions::devices, got none");
  for (const Device& d : devices)
    if (d.is_cuda()) cuda::check_device(d.index, "Pipe");
  LOOM_CHECK(n_stages <= layers, "Pipe: more devices (", n_stages, ": ", list_str(devices),
             ") than layers (", layers, "); every stage needs at least one layer");
  if (options_.balance_.empty()) {
    for (int64_t s = 0; s < n_stages; ++s)
      balance_.push_back(layers / n_stages + (s < layers % n_stages ? 1 : 0));
  } else {
    balance_ = options_.balance_;
    LOOM_CHECK(static_cast<int64_t>(balance_.size()) == n_stages, "Pipe: balance ",
               list_str(balance_), " has ", balance_.size(), " stages but ", n_stages,
               " devices were given ", list_str(devices));
    int64_t sum = 0;
    for (size_t s = 0; s < balance_.size(); ++s) {
      LOOM_CHECK(balance_[s] >= 1, "Pipe: balance[", s, "] = ", balance_[s],
                 "; every stage needs at least one layer");
      sum += balance_[s];
    }
    LOOM_CHECK(sum == layers, "Pipe: balance ", list_str(balance_), " sums to ", sum,
               " but the Sequential has ", layers, " layers");
  }
  LOOM_CHECK(options_.chunks_ >= 1, "Pipe: chunks must be >= 1, got ", options_.chunks_);
  if (options_.split_size_) {
    LOOM_CHECK(*options_.split_size_ >= 1, "Pipe: split_size must be >= 1, got ",
               *options_.split_size_);
    LOOM_CHECK(options_.chunks_ == 1, "Pipe: set either chunks (", options_.chunks_,
               ") or split_size (", *options_.split_size_, "), not both");
  }
  int64_t first = 0;
  for (int64_t s = 0; s < n_stages; ++s) {
    nn::Sequential stage(sequential->slice(first, first + balance_[s]));
    stage->to(devices[s]);
    register_child(std::to_string(s), stage.ptr());
    stages_.push_back(stage);
    first_layer_.push_back(first);
    first += balance_[s];
  }
  if (options_.deferred_batch_norm_) {
    for (auto& stage : stages_)
      stage->apply([&](nn::Module& m) {
        auto* bn = dynamic_cast<nn::BatchNormBase*>(&m);
        if (bn == nullptr) return;
        LOOM_CHECK(bn->forward_to == nullptr, "Pipe: deferred_batch_norm: ", bn->type_name(),
                   " already forwards to a ", bn->forward_to->type_name(),
                   " (converted to SyncBatchNorm, or in another deferred pipe)");
        auto deferred = std::make_shared<DeferredBatchNormImpl>(bn);
        bn->forward_to = deferred;
        deferred_.emplace_back(bn, deferred);
      });
  }
}

PipeImpl::~PipeImpl() {
  for (auto& [bn, deferred] : deferred_)
    if (bn->forward_to == deferred) bn->forward_to = nullptr;
}

void PipeImpl::begin_deferred(int64_t micro_batches) const {
  for (auto& entry : deferred_) entry.second->begin(micro_batches);
}

std::vector<Tensor> PipeImpl::split(const Tensor& input) const {
  LOOM_CHECK(input.defined(), "Pipe: the input is undefined");
  LOOM_CHECK(input.dim() >= 1 && input.size(0) >= 1, "Pipe: expected an input with a batch "
             "dimension of at least one row, got ", input.describe());
  if (options_.split_size_) return input.split(*options_.split_size_, 0);
  return input.chunk(options_.chunks_, 0);
}

bool PipeImpl::checkpointed(size_t i, size_t micro_batches) const {
  switch (options_.checkpoint_) {
    case Checkpoint::kAlways: return true;
    case Checkpoint::kExceptLast: return i + 1 < micro_batches;
    case Checkpoint::kNever: return false;
  }
  return false;
}

void PipeImpl::prepare_waiting_stages() const {
  if (!options_.reuse_weights_) return;
  for (size_t s = 1; s < stages_.size(); ++s) {
    const Device device = options_.devices_[s];
    if (device.is_cpu())
      Stream::default_stream(device).submit([device] { prepare_kept_weights(device); });
  }
}

void PipeImpl::submit_micro_batch(Run& run, size_t i, const LossFn* loss_fn) const {
  const size_t n_stages = stages_.size();
  const bool recompute = checkpointed(i, run.inputs.size());
  // Carried into the stream closures like grad mode.
  autograd::DeferWeightGradGuard defer(options_.defer_weight_gradients_);
  WeightReuseGuard reuse(options_.reuse_weights_);
  Event previous;
  for (size_t s = 0; s < n_stages; ++s) {
    const Device device = options_.devices_[s];
    Stream compute = Stream::default_stream(device);
    if (s > 0) {
      // The hand-over: on the consumer's copy stream, after the producer.
      Stream copy = Stream::copy_stream(device);
      copy.wait_event(previous);
      copy.submit([&run, s, i, device, compute] {
        Tensor handed = run.outputs[s - 1][i].to(device);
        // CUDA: the copy's memory comes from the copy stream's pool and is
        // read on the compute stream; keep it from reuse until that is done.
        if (device.is_cuda() && handed.storage().data() != nullptr)
          cuda::record_stream(handed.storage(), compute.native_handle());
        run.handed[s][i] = handed;
      });
      compute.wait_event(copy.record());
    }
    const bool last = s + 1 == n_stages;
    compute.submit([this, &run, s, i, device, last, loss_fn, recompute] {
      if (s == 0) run.handed[0][i] = run.inputs[i].to(device);
      const int64_t a = first_layer_[s], b = first_layer_[s] + balance_[s] - 1;
      Tensor y;
      try {
        const nn::Sequential& stage = stages_[s];
        if (recompute) {
          y = autograd::checkpoint([stage](const Tensor& x) { return stage->forward(x); },
                                   run.handed[s][i], stage->parameters());
        } else {
          y = stage->forward(run.handed[s][i]);
        }
      } catch (const std::exception& e) {
        LOOM_FAIL("Pipe stage ", s, " (layers ", a, "..", b, ") on ", device,
                  ", micro-batch ", i, ": ", e.what());
      }
      LOOM_CHECK(y.defined() && y.device() == device, "Pipe stage ", s, " (layers ", a, "..",
                 b, ") is placed on ", device, " but returned a tensor on ",
                 y.defined() ? y.device().str() : std::string("(undefined)"),
                 " for micro-batch ", i, "; a stage must return its output on its own device");
      run.outputs[s][i] = y;
      if (last && loss_fn) {
        Tensor loss = (*loss_fn)(y, run.targets[i].to(device));
        LOOM_CHECK(loss.defined() && loss.numel() == 1, "Pipe::train_step: loss_fn must return "
                   "a one-element loss, got ", loss.defined() ? loss.describe() : "(undefined)");
        run.losses[i] = loss * run.weights[i];
      }
    });
    previous = compute.record();
  }
  run.done[i] = previous;
}

void PipeImpl::synchronize_all() const {
  std::exception_ptr first;
  for (size_t s = 0; s < stages_.size(); ++s) {
    const Device device = options_.devices_[s];
    for (const Stream& stream : {Stream::copy_stream(device), Stream::default_stream(device)}) {
      try {
        stream.synchronize();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
  }
  if (first) std::rethrow_exception(first);
}

void PipeImpl::abandon_pass() const {
  try {
    synchronize_all();
  } catch (...) {
  }
  begin_deferred(0);
}

Tensor PipeImpl::forward(const Tensor& input) {
  Run run(split(input), stages_.size());
  begin_deferred(static_cast<int64_t>(run.inputs.size()));
  prepare_waiting_stages();
  try {
    for (size_t i = 0; i < run.inputs.size(); ++i) submit_micro_batch(run, i, nullptr);
    synchronize_all();
  } catch (...) {
    // A submission that throws (a CUDA error recording an event) leaves the
    // closures queued so far, which write into `run`.
    abandon_pass();
    throw;
  }
  begin_deferred(0);
  std::vector<Tensor>& outs = run.outputs.back();
  return outs.size() == 1 ? outs[0] : cat(outs, 0);
}

Tensor PipeImpl::train_step(const Tensor& inputs, const Tensor& targets, const LossFn& loss_fn) {
  LOOM_CHECK(loss_fn != nullptr, "Pipe::train_step: loss_fn is empty");
  LOOM_CHECK(autograd::GradMode::is_enabled(), "Pipe::train_step: grad mode is disabled "
             "(NoGradGuard active); train_step needs autograd");
  LOOM_CHECK(targets.defined(), "Pipe::train_step: targets are undefined");
  std::vector<Tensor> micro = split(inputs);
  LOOM_CHECK(targets.dim() >= 1 && targets.size(0) == inputs.size(0), "Pipe::train_step: "
             "inputs have ", inputs.size(0), " rows but targets ", targets.describe());
  const Device last = options_.devices_.back();

  if (options_.schedule_ == Schedule::kGPipe) {
    Tensor output = forward(inputs);
    Tensor loss = loss_fn(output, targets.to(last));
    LOOM_CHECK(loss.defined() && loss.numel() == 1, "Pipe::train_step: loss_fn must return a "
               "one-element loss, got ", loss.defined() ? loss.describe() : "(undefined)");
    autograd::backward({loss});
    return loss.detach();
  }

  // 1F1B: forward of micro-batch i + S - 1 is in flight while micro-batch i's
  // backward runs here.
  std::vector<int64_t> rows;
  for (const Tensor& t : micro) rows.push_back(t.size(0));
  Run run(std::move(micro), stages_.size());
  run.targets = targets.split_with_sizes(rows, 0);
  const size_t m = run.inputs.size();
  const size_t in_flight = stages_.size();
  size_t submitted = 0;
  Tensor total;
  begin_deferred(static_cast<int64_t>(m));
  prepare_waiting_stages();
  try {
    for (size_t i = 0; i < m; ++i) {
      while (submitted < m && submitted < i + in_flight) submit_micro_batch(run, submitted++, &loss_fn);
      run.done[i].synchronize();
      Tensor loss = run.losses[i];
      autograd::backward({loss});
      total = total.defined() ? total + loss.detach() : loss.detach();
      run.release(i);  // frees micro-batch i's activations
    }
    synchronize_all();
  } catch (...) {
    // Never leave work that refers to `run` behind; report the first error.
    abandon_pass();
    throw;
  }
  begin_deferred(0);
  return total;
}

void PipeImpl::to(Device device, bool /*non_blocking*/) {
  LOOM_FAIL("Pipe: cannot move a pipe to ", device, "; its stages live on ",
            list_str(options_.devices_), " (choose PipeOptions::devices instead)");
}

void PipeImpl::pretty_print(std::ostream& out) const {
  out << "Pipe(devices=" << list_str(options_.devices_) << ", balance=" << list_str(balance_);
  if (options_.split_size_)
    out << ", split_size=" << *options_.split_size_;
  else
    out << ", chunks=" << options_.chunks_;
  out << ", schedule=" << (options_.schedule_ == Schedule::kGPipe ? "GPipe" : "1F1B");
  if (options_.checkpoint_ == Checkpoint::kAlways) out << ", checkpoint=always";
  if (options_.checkpoint_ == Checkpoint::kExceptLast) out << ", checkpoint=except_last";
  out << ")";
}

}  // namespace pipeline
}  // namespace loom
