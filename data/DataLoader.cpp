#include "data/DataLoader.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "autograd/GradMode.h"
#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Parallel.h"
#include "tensor/ThreadName.h"

namespace loom {
namespace data {

namespace {

// A CPU tensor's copy in page-locked memory (as torch's pin_memory): later
// `.to(cuda, non_blocking=true)` copies from it run asynchronously.
Tensor pinned_copy(const Tensor& t) {
  if (!t.defined() || !t.is_cpu() || t.is_pinned()) return t;
  Tensor pinned = cuda::pinned_empty(t.sizes(), t.dtype());
  pinned.copy_(t);
  return pinned;
}

}  // namespace

// One pass over the batches: the batch list, and the workers filling a
// window of results ahead of the consumer.
class DataLoader::Epoch {
 public:
  Epoch(std::shared_ptr<Dataset> dataset, std::vector<std::vector<int64_t>> batches,
        int64_t num_workers, int64_t prefetch, bool pin)
      : dataset_(std::move(dataset)), batches_(std::move(batches)), pin_(pin) {
    window_ = std::max<int64_t>(1, num_workers * prefetch);
    claimed_.assign(batches_.size(), 0);
    for (int64_t w = 0; w < num_workers; ++w) workers_.emplace_back([this, w, num_workers] { work(w, num_workers); });
  }

  ~Epoch() { stop(); }

  int64_t size() const { return static_cast<int64_t>(batches_.size()); }

  // Batch `index`: made here when no worker has started it (always without
  // workers), else waited for.
  Example take(int64_t index) {
    if (workers_.empty()) return make_here(index);
    std::unique_lock<std::mutex> lock(mutex_);
    consumed_ = index;
    cv_.notify_all();
    if (!claimed_[index]) {
      claimed_[index] = 1;
      lock.unlock();
      Example e = make_here(index);
      lock.lock();
      consumed_ = index + 1;
      cv_.notify_all();
      return e;
    }
    cv_.wait(lock, [&] { return ready_.count(index) > 0; });
    Result r = std::move(ready_[index]);
    ready_.erase(index);
    consumed_ = index + 1;
    cv_.notify_all();
    if (r.error) std::rethrow_exception(r.error);
    return std::move(r.example);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    workers_.clear();
  }

 private:
  struct Result {
    Example example;
    std::exception_ptr error;
  };

  Example make_here(int64_t index) {
    autograd::NoGradGuard no_grad;
    return make(index);
  }

  void work(int64_t worker, int64_t num_workers) {
    set_current_thread_name("loom-data-" + std::to_string(worker));
    set_thread_num_threads(1);
    // The lowest CPU priority: on a machine whose cores all run the training
    // step's threads, a worker preempting one of them would stall every
    // parallel region; so workers take only cycles the step leaves idle, and
    // take() makes a batch itself when no worker has started it.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    autograd::NoGradGuard no_grad;
    for (int64_t b = worker; b < size(); b += num_workers) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || b < consumed_ + window_; });
        if (stopping_) return;
        if (claimed_[b]) continue;  // the consumer made it
        claimed_[b] = 1;
      }
      Result r;
      try {
        r.example = make(b);
      } catch (...) {
        r.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_[b] = std::move(r);
      }
      cv_.notify_all();
    }
  }

  // Batch b from the dataset, in pinned memory when asked for.
  Example make(int64_t b) {
    Example e = dataset_->get_batch(batches_[b]);
    if (pin_) {
      e.data = pinned_copy(e.data);
      e.target = pinned_copy(e.target);
    }
    return e;
  }

  std::shared_ptr<Dataset> dataset_;
  std::vector<std::vector<int64_t>> batches_;
  bool pin_ = false;
  int64_t window_ = 1;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int64_t, Result> ready_;
  std::vector<char> claimed_;  // batch started by a worker or the consumer
  int64_t consumed_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), options_(options) {
  LOOM_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  LOOM_CHECK(options_.batch_size_ > 0, "DataLoader: batch_size should be a positive integer, got ",
             options_.batch_size_);
  LOOM_CHECK(options_.num_workers_ >= 0, "DataLoader: num_workers should be >= 0, got ",
             options_.num_workers_);
  LOOM_CHECK(options_.prefetch_factor_ > 0, "DataLoader: prefetch_factor should be positive, got ",
             options_.prefetch_factor_);
  LOOM_CHECK(!(sampler && options_.shuffle_),
             "DataLoader: sampler option is mutually exclusive with shuffle");
  if (!sampler) {
    owns_shuffling_ = options_.shuffle_;
    if (options_.shuffle_) sampler = std::make_shared<RandomSampler>(dataset_->size(), options_.seed_);
    else sampler = std::make_shared<SequentialSampler>(dataset_->size());
  }
  batch_sampler_ = std::make_unique<BatchSampler>(std::move(sampler), options_.batch_size_,
                                                  options_.drop_last_);
}

DataLoader::~DataLoader() {
  if (epoch_) epoch_->stop();
}

DataLoader::Iterator DataLoader::begin() {
  if (epoch_) epoch_->stop();
  if (owns_shuffling_) batch_sampler_->sampler().set_epoch(epochs_started_);
  ++epochs_started_;
  // Like PyTorch, pin_memory without a usable GPU leaves batches as they are.
  const bool pin = options_.pin_memory_ && cuda::is_available();
  epoch_ = std::make_shared<Epoch>(dataset_, batch_sampler_->batches(), options_.num_workers_,
                                   options_.prefetch_factor_, pin);
  return Iterator(epoch_, 0);
}

DataLoader::Iterator DataLoader::end() {
  return Iterator(nullptr, epoch_ ? epoch_->size() : 0);
}

DataLoader::Iterator::Iterator(std::shared_ptr<Epoch> epoch, int64_t position)
    : epoch_(std::move(epoch)), position_(position) {
  if (epoch_) load();
}

void DataLoader::Iterator::load() {
  if (position_ < epoch_->size()) current_ = epoch_->take(position_);
  else current_ = Example();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++position_;
  load();
  return *this;
}

}  // namespace data
}  // namespace loom
