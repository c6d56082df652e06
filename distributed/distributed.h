// Umbrella header of loom's distributed layer (target //distributed).
//
//   init_process_group / collectives     distributed/DefaultGroup.h
//   ProcessGroupGloo                     distributed/ProcessGroupGloo.h
//   ProcessGroupNccl (CUDA builds)       distributed/ProcessGroupNccl.h
//   TCPStore, FileStore, PrefixStore     distributed/store/
//   spawn (in C++, like mp.spawn)        distributed/launch/Spawn.h
//   DistributedDataParallel              distributed/parallel/DistributedDataParallel.h
//   nn::SyncBatchNorm                    distributed/parallel/SyncBatchNorm.h
//   all_gather_concat, all_reduce_mean   distributed/parallel/Evaluation.h
// The launcher is the binary //distributed/launch:loomrun.  The Horovod-style
// API is its own target, //distributed/horovod (distributed/horovod/horovod.h).
#pragma once

#include "distributed/DefaultGroup.h"
#include "distributed/ProcessGroup.h"
#include "distributed/ProcessGroupGloo.h"
#include "distributed/ProcessGroupNccl.h"
#include "distributed/launch/Spawn.h"
#include "distributed/parallel/DistributedDataParallel.h"
#include "distributed/parallel/Evaluation.h"
#include "distributed/parallel/SyncBatchNorm.h"
#include "distributed/store/FileStore.h"
#include "distributed/store/HashStore.h"
#include "distributed/store/PrefixStore.h"
#include "distributed/store/TCPStore.h"
