// DataLoader: batches a Dataset in sampler order, optionally on background
// worker threads that prefetch ahead, as torch.utils.data.DataLoader.
//
//   data::DataLoader loader(dataset, data::DataLoaderOptions(128).shuffle(true).num_workers(2));
//   for (const data::Example& batch : loader) { ... batch.data, batch.target ... }
//
// Batches always arrive in sampler order.  A worker's exception is rethrown
// by the loop when it reaches that batch.  Leaving the loop early stops the
// workers.  Workers compute single-threaded at the lowest CPU priority (nice
// 19), so they use only cycles the training step leaves idle and never
// preempt its threads; when the loop reaches a batch no worker has started,
// it makes that batch itself instead of waiting.  So workers cost nothing on
// a machine whose cores the step fills, and prefetch on one with cores to
// spare.
#pragma once

#include <memory>
#include <vector>

#include "data/Dataset.h"
#include "data/Sampler.h"

namespace loom {
namespace data {

struct DataLoaderOptions {
  explicit DataLoaderOptions(int64_t batch_size = 1) : batch_size_(batch_size) {}
  DataLoaderOptions& batch_size(int64_t v) { batch_size_ = v; return *this; }
  // Reshuffle every epoch (a RandomSampler seeded with `seed`, epoch by epoch).
  DataLoaderOptions& shuffle(bool v) { shuffle_ = v; return *this; }
  DataLoaderOptions& seed(uint64_t v) { seed_ = v; return *this; }
  DataLoaderOptions& drop_last(bool v) { drop_last_ = v; return *this; }
  // 0: batches are made on the loop's thread when asked for.
  DataLoaderOptions& num_workers(int64_t v) { num_workers_ = v; return *this; }
  // Batches each worker may prepare ahead.
  DataLoaderOptions& prefetch_factor(int64_t v) { prefetch_factor_ = v; return *this; }
  // Page-locked host memory for faster GPU copies (no effect without CUDA).
  DataLoaderOptions& pin_memory(bool v) { pin_memory_ = v; return *this; }
  int64_t batch_size_;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  bool drop_last_ = false;
  int64_t num_workers_ = 0;
  int64_t prefetch_factor_ = 2;
  bool pin_memory_ = false;
};

class DataLoader {
 public:
  // `sampler` replaces shuffle/seed when given (e.g. a DistributedSampler).
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Epoch;
  class Iterator {
   public:
    Iterator() = default;
    const Example& operator*() const { return current_; }
    const Example* operator->() const { return &current_; }
    Iterator& operator++();
    bool operator!=(const Iterator& other) const { return position_ != other.position_; }
    bool operator==(const Iterator& other) const { return position_ == other.position_; }

   private:
    friend class DataLoader;
    Iterator(std::shared_ptr<Epoch> epoch, int64_t position);
    void load();
    std::shared_ptr<Epoch> epoch_;
    int64_t position_ = -1;
    Example current_;
  };

  // Starts an epoch (stopping any unfinished one).
  Iterator begin();
  Iterator end();
  // Batches per epoch.
  int64_t size() const { return batch_sampler_->size(); }
  // Number of examples in the dataset.
  int64_t dataset_size() const { return dataset_->size(); }
  Sampler& sampler() { return batch_sampler_->sampler(); }
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<BatchSampler> batch_sampler_;
  bool owns_shuffling_ = false;
  int64_t epochs_started_ = 0;
  std::shared_ptr<Epoch> epoch_;
};

}  // namespace data
}  // namespace loom
