// A Horovod-style API on loom's process groups (target //distributed/horovod):
//
//   #include "distributed/horovod/horovod.h"
//   using namespace loom;
//
//   hvd::init();
//   optim::SGD sgd(model->parameters(), optim::SGDOptions(0.01 * hvd::size()).momentum(0.5));
//   hvd::DistributedOptimizer optimizer(sgd, model->named_parameters());
//   hvd::broadcast_parameters(model->state_dict(), 0);
//   hvd::broadcast_optimizer_state(sgd, 0);
//   ... optimizer.zero_grad(); loss.backward(); optimizer.step(); ...
//
// Launch one process per rank with loomrun (-np N is Horovod's spelling of
// --nproc_per_node N):
//   bazel-bin/distributed/launch/loomrun -np 2 bazel-bin/examples/mnist/train_horovod
//
//   init, rank, size, local_rank, local_size   distributed/horovod/Basics.h
//   allreduce, allgather, broadcast, alltoall,
//     join, Average/Sum/...                    distributed/horovod/Ops.h
//   Handle, poll, synchronize                  distributed/horovod/Handle.h
//   DistributedOptimizer                       distributed/horovod/DistributedOptimizer.h
//   broadcast_parameters,
//     broadcast_optimizer_state                distributed/horovod/Broadcast.h
//   Compression                                distributed/horovod/Compression.h
//   how ranks agree (names, fusion, join)      distributed/horovod/Negotiation.h, Controller.h
#pragma once

#include "distributed/horovod/Basics.h"
#include "distributed/horovod/Broadcast.h"
#include "distributed/horovod/Compression.h"
#include "distributed/horovod/DistributedOptimizer.h"
#include "distributed/horovod/Handle.h"
#include "distributed/horovod/Ops.h"

namespace loom {
// hvd::init(), hvd::rank(), hvd::DistributedOptimizer(...), as Horovod's `hvd.`.
namespace hvd = distributed::horovod;
}  // namespace loom
