// DistributedSampler: each of num_replicas processes sees its own share of a
// dataset, as torch.utils.data.DistributedSampler.
//
// Every rank computes the same epoch order (a permutation seeded by
// seed + epoch when shuffling, 0..size-1 otherwise) and takes every
// num_replicas-th index starting at its rank.  So that every rank gets the
// same number of indices (collectives in a training step need every rank to
// take the same number of steps), the order is first padded by repeating
// indices from its start (a few examples are seen twice per epoch) or, with
// drop_last, truncated to a multiple of num_replicas (the tail is skipped).
// The index lists equal PyTorch's for shuffle = false; shuffled orders use
// loom's Generator (as RandomSampler does), so they differ from PyTorch's.
//
//   auto sampler = std::make_shared<data::DistributedSampler>(dataset->size());
//   data::DataLoader loader(dataset, data::DataLoaderOptions(64), sampler);
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     sampler->set_epoch(epoch);  // as in PyTorch: otherwise every epoch has the same order
//     for (const auto& batch : loader) { ... }
//   }
//
// A DataLoader given a sampler does not call set_epoch itself: call it at the
// start of every epoch, with the same epoch number on every rank.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/Sampler.h"

namespace loom {
namespace data {

struct DistributedSamplerOptions {
  // Number of processes sharing the dataset; unset: the WORLD_SIZE
  // environment variable (set by loomrun, distributed::spawn, torchrun).
  DistributedSamplerOptions& num_replicas(int v) { num_replicas_ = v; return *this; }
  // This process's rank in [0, num_replicas); unset: the RANK environment variable.
  DistributedSamplerOptions& rank(int v) { rank_ = v; return *this; }
  // Visit the dataset in a fresh permutation every epoch (seeded by seed + epoch).
  DistributedSamplerOptions& shuffle(bool v) { shuffle_ = v; return *this; }
  // Must be the same on every rank.
  DistributedSamplerOptions& seed(uint64_t v) { seed_ = v; return *this; }
  // Drop the tail that does not divide evenly instead of padding with repeats.
  DistributedSamplerOptions& drop_last(bool v) { drop_last_ = v; return *this; }

  std::optional<int> num_replicas_;
  std::optional<int> rank_;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  bool drop_last_ = false;
};

class DistributedSampler : public Sampler {
 public:
  // Throws loom::Error when dataset_size < 0, num_replicas < 1, rank is not in
  // [0, num_replicas), or an unset num_replicas/rank cannot be read from the
  // environment (variable missing or not an integer).
  explicit DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options = {});

  // This rank's indices for the current epoch (see set_epoch): size() of them.
  std::vector<int64_t> indices() override;
  // Indices per rank per epoch: ceil(dataset_size / num_replicas), or
  // floor(dataset_size / num_replicas) with drop_last.
  int64_t size() const override { return num_samples_; }

  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  int64_t dataset_size() const { return dataset_size_; }
  // size() * num_replicas: the length of the padded or truncated epoch order.
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

}  // namespace data
}  // namespace loom
