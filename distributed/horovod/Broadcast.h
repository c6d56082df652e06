// Making every rank start from root's model and optimizer (Horovod's
// hvd.broadcast_parameters and hvd.broadcast_optimizer_state).
//
//   hvd::broadcast_parameters(model->state_dict(), /*root_rank=*/0);
//   hvd::broadcast_optimizer_state(sgd, /*root_rank=*/0);
//
// Both are collective (every rank calls them) and go through hvd's
// background thread like any hvd operation, so the tensors are fused per
// dtype into few broadcasts.
#pragma once

#include "distributed/horovod/DistributedOptimizer.h"
#include "nn/OrderedDict.h"
#include "optim/Optimizer.h"

namespace loom {
namespace distributed {
namespace horovod {

// Writes root_rank's values into every rank's tensors, in place and without
// autograd history: a model's state_dict() (parameters and buffers) or
// named_parameters().  Tensors are matched by name ("broadcast_parameters.
// <name>"), so every rank passes the same names with the same shapes and
// dtypes.  Throws loom::Error for a bad root, before hvd::init(), or when
// the ranks disagree (every rank alike).
void broadcast_parameters(const nn::OrderedDict<Tensor>& params, int root_rank);

// Makes every rank's optimizer state equal to root_rank's: per-parameter
// state (momentum buffers, Adam's moments and step) and the
// hyperparameters of every group (lr, momentum, ...).  Ranks whose optimizer
// has no state yet (it has not stepped) get root's, created here; state that
// root does not have is dropped.  Root's state layout (names, dtypes, shapes)
// is broadcast first.  The optimizers must have the same parameter groups
// with the same numbers of parameters (else optim::Optimizer::load_state_dict
// throws on the ranks that differ from root).
void broadcast_optimizer_state(optim::Optimizer& optimizer, int root_rank);
void broadcast_optimizer_state(DistributedOptimizer& optimizer, int root_rank);

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
