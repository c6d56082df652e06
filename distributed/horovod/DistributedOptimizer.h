// hvd::DistributedOptimizer: Horovod's data parallelism by optimizer
// wrapping (horovod.torch.DistributedOptimizer).
//
//   hvd::init();
//   optim::SGD sgd(model->parameters(), optim::SGDOptions(0.01 * hvd::size()));
//   hvd::DistributedOptimizer optimizer(sgd, model->named_parameters());
//   hvd::broadcast_parameters(model->state_dict(), /*root_rank=*/0);
//   hvd::broadcast_optimizer_state(sgd, /*root_rank=*/0);
//   for (...) {
//     optimizer.zero_grad();
//     loss(model->forward(x), y).backward();  // all-reduces start during backward
//     optimizer.step();                       // waits for them, then updates
//   }
//
// How it works.  Each parameter gets a post-accumulate hook.  When backward
// has accumulated a parameter's gradient for the backward_passes_per_step-th
// time since the last step, the hook submits its all-reduce (in place on
// .grad) to hvd's background thread, which fuses the gradients that are
// ready together into buffers of up to the fusion threshold and reduces
// them while backward goes on (distributed/horovod/Controller.h).  step()
// calls synchronize(): it submits the parameters that got no gradient (as
// zeros, so every rank reduces every parameter), waits for every all-reduce,
// writes the results into .grad, then steps the wrapped optimizer.  With op
// Average, .grad ends up holding the average of the ranks' (accumulated)
// gradients, as DistributedDataParallel's.
//
// backward_passes_per_step = k: gradients accumulate locally (summed in
// .grad, as without hvd) over k backward passes; the k-th starts the
// all-reduces.  So k micro-batches per rank and step equal one process
// accumulating all of them (divide the loss by k for a mean).
//
// Misuse is an error, as in Horovod (loom::Error, from the call that misuses):
//   * zero_grad() after backward() produced gradients but before step() or
//     synchronize() (it would race with the pending reductions);
//   * a gradient produced more than backward_passes_per_step times before
//     step() (thrown by backward(), from the hook).
//
// Why not DDP's Reducer (distributed/parallel/Reducer.h)?  It reduces fixed
// buckets in a fixed order and finishes inside backward, which is DDP's
// contract; Horovod's is different: tensors are matched by name whenever
// they are ready on every rank, gradients may accumulate over several
// backward passes, the wait is in step(), and joined ranks must be able to
// mirror reductions they do not take part in.  Both share the mechanism
// (post-accumulate hooks, flat fused buffers, collectives on loom's process
// groups); the matching lives in distributed/horovod/Negotiation.h.
//
// The wrapped optimizer must outlive this object (as for LR schedulers);
// schedulers and checkpoints work on it directly.  Parameters are matched
// across ranks by name, so the named_parameters must name the same
// parameters the same way on every rank.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/ReduceOp.h"
#include "distributed/horovod/Compression.h"
#include "distributed/horovod/Ops.h"
#include "nn/OrderedDict.h"
#include "optim/Optimizer.h"

namespace loom {
namespace distributed {
namespace horovod {

class DistributedOptimizer {
 public:
  // named_parameters: names for the optimizer's parameters (e.g.
  // model->named_parameters()); empty: "allreduce.noname.<group>.<index>".
  // Every optimizer parameter must be named (names unique); named tensors
  // that the optimizer does not hold are ignored.  op: Average or Sum.
  // gradient_predivide_factor f (Average only): gradients are divided by f
  // before the sum and multiplied by f / size() after (Horovod's).  Throws
  // loom::Error for a bad argument (naming it) or before hvd::init().
  DistributedOptimizer(optim::Optimizer& optimizer, const nn::OrderedDict<Tensor>& named_parameters = {},
                       CompressorPtr compression = Compression::none, int backward_passes_per_step = 1,
                       ReduceOp op = Average, double gradient_predivide_factor = 1.0);
  // Removes the hooks; waits for reductions still running (errors ignored).
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // synchronize() (unless inside skip_synchronize()), then the wrapped
  // optimizer's step().  Throws a reduction's error (every rank alike when
  // ranks disagree), after which the optimizer is ready for the next step;
  // the parameters are then not updated.
  void step();
  // Submits the all-reduces of parameters that have none running yet (no
  // gradient: zeros; fewer than backward_passes_per_step passes: what has
  // accumulated), waits for all of them and writes the results into .grad.
  // Call it before step() to clip or inspect the averaged gradients, then
  // step inside skip_synchronize().
  void synchronize();
  // Clears the gradients (optim::Optimizer::zero_grad).  Throws while
  // reductions are pending or gradients are accumulating for a step.
  void zero_grad(bool set_to_none = true);

  // While the guard lives, step() does not synchronize.
  class SkipSynchronizeGuard {
   public:
    explicit SkipSynchronizeGuard(DistributedOptimizer* optimizer);
    SkipSynchronizeGuard(SkipSynchronizeGuard&& other) noexcept;
    SkipSynchronizeGuard(const SkipSynchronizeGuard&) = delete;
    SkipSynchronizeGuard& operator=(const SkipSynchronizeGuard&) = delete;
    SkipSynchronizeGuard& operator=(SkipSynchronizeGuard&&) = delete;
    ~SkipSynchronizeGuard();

   private:
    DistributedOptimizer* optimizer_;
    bool previous_;
  };
  SkipSynchronizeGuard skip_synchronize() { return SkipSynchronizeGuard(this); }

  int backward_passes_per_step() const;
  // Takes effect for the next step; throws for values < 1 or while
  // gradients are pending.
  void set_backward_passes_per_step(int passes);

  optim::Optimizer& optimizer() { return optimizer_; }
  std::vector<optim::ParamGroup>& param_groups() { return optimizer_.param_groups(); }
  nn::OrderedDict<Tensor> state_dict() const { return optimizer_.state_dict(); }
  void load_state_dict(const nn::OrderedDict<Tensor>& state) { optimizer_.load_state_dict(state); }
  // The name each synchronised parameter's all-reduce carries, in order.
  std::vector<std::string> parameter_names() const;

  struct State;  // shared with the hooks

 private:
  optim::Optimizer& optimizer_;
  std::shared_ptr<State> state_;
  bool should_synchronize_ = true;
  bool synchronized_ = false;  // synchronize() ran since the last step()
  bool warned_double_sync_ = false;
};

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
