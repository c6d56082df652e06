// Rendezvous: where a process learns its rank, the world size and the store
// it meets the others through, from an init method and the environment.
//
//   env://           MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK (torchrun,
//                    loomrun); when RANK/WORLD_SIZE are unset, Slurm's
//                    SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID or Open MPI's
//                    OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK
//   tcp://host:port  the master's address; rank and world size given
//   file:///path     a FileStore on a shared file system
// Explicit rank/world_size (>= 0) override the environment.  Rank 0 hosts
// the TCPStore server.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "distributed/store/Store.h"

namespace loom {
namespace distributed {

struct RendezvousInfo {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
  int local_rank = 0;
  int local_world_size = 1;
  // Which variables the rank came from: "explicit", "torchrun", "slurm",
  // "openmpi".
  std::string source;
  // The master's host for env:// and tcp:// (empty for file://).
  std::string master_host;
};

// The address of this machine's interface that traffic to host leaves from
// (a connected UDP socket's local address; nothing is sent).  "127.0.0.1"
// when host is a loopback address or cannot be resolved.
std::string local_address_towards(const std::string& host);

// The launcher's view of the environment, without touching any store:
// rank, world size, local rank and local world size, from explicit values
// or the variables above.  Throws loom::Error naming the missing variables.
RendezvousInfo rank_from_environment(int rank, int world_size);

// Resolves init_method into a connected store plus rank information.
// Throws loom::Error for an unknown scheme, a malformed URL, missing
// variables (naming them), rank outside [0, world_size), or a store that
// cannot be reached within timeout.
RendezvousInfo rendezvous(const std::string& init_method, int rank, int world_size,
                          std::chrono::milliseconds timeout);

// Reads an environment variable; nullptr when unset or empty.
const char* env_or_null(const char* name);

}  // namespace distributed
}  // namespace loom
