// Samplers: the order in which a DataLoader visits indices.
//   SequentialSampler  0, 1, ..., n-1
//   RandomSampler      a permutation, reseeded from (seed, epoch) each epoch
//   BatchSampler       groups another sampler's indices into batches
// The distributed sampler lives with the distributed layer's users in
// data/DistributedSampler.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace loom {
namespace data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices of one epoch.
  virtual std::vector<int64_t> indices() = 0;
  // Number of indices per epoch.
  virtual int64_t size() const = 0;
  // Selects the epoch whose order indices() returns (shuffling samplers).
  virtual void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

 protected:
  int64_t epoch_ = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size);
  std::vector<int64_t> indices() override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
};

// A fresh permutation every epoch: epoch e uses Generator(seed + e), so runs
// are reproducible and each epoch differs.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size, uint64_t seed = 0);
  std::vector<int64_t> indices() override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
  uint64_t seed_;
};

class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last);
  // The batches of one epoch; the last may be short unless drop_last.
  std::vector<std::vector<int64_t>> batches();
  // Number of batches per epoch.
  int64_t size() const;
  Sampler& sampler() { return *sampler_; }

 private:
  std::shared_ptr<Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

}  // namespace data
}  // namespace loom
