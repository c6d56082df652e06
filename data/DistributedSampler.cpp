#include "data/DistributedSampler.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <numeric>
#include <string>

#include "tensor/Error.h"

namespace loom {
namespace data {
namespace {

// The integer value of environment variable `name`; throws when it is unset
// or not an integer.  `what` names the option it stands in for.
int int_from_env(const char* name, const char* what) {
  const char* text = std::getenv(name);
  LOOM_CHECK(text != nullptr && *text != '\0', "DistributedSampler: ", what,
             " was not given and the ", name,
             " environment variable is not set; pass it in DistributedSamplerOptions or start "
             "the processes with loomrun or distributed::spawn");
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  LOOM_CHECK(errno == 0 && *end == '\0' && value >= INT_MIN && value <= INT_MAX,
             "DistributedSampler: the ", name, " environment variable should be an integer, got '",
             text, "'");
  return static_cast<int>(value);
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size),
      shuffle_(options.shuffle_),
      seed_(options.seed_),
      drop_last_(options.drop_last_) {
  LOOM_CHECK(dataset_size >= 0, "DistributedSampler: dataset_size must be >= 0, got ",
             dataset_size);
  num_replicas_ = options.num_replicas_ ? *options.num_replicas_
                                        : int_from_env("WORLD_SIZE", "num_replicas");
  rank_ = options.rank_ ? *options.rank_ : int_from_env("RANK", "rank");
  LOOM_CHECK(num_replicas_ >= 1, "DistributedSampler: num_replicas must be >= 1, got ",
             num_replicas_);
  LOOM_CHECK(rank_ >= 0 && rank_ < num_replicas_, "DistributedSampler: invalid rank ", rank_,
             ", rank should be in the interval [0, ", num_replicas_ - 1, "]");
  // PyTorch writes the drop_last case as ceil((size - R) / R) when R does not
  // divide size; for size >= 0 that is floor(size / R) either way.
  num_samples_ = drop_last_ ? dataset_size_ / num_replicas_
                            : (dataset_size_ + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices() {
  std::vector<int64_t> order;
  if (shuffle_) {
    // The same permutation RandomSampler gives for (seed, epoch), on every rank.
    RandomSampler permutation(dataset_size_, seed_);
    permutation.set_epoch(epoch_);
    order = permutation.indices();
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t total = total_size();
  // Pad by repeating the order from its start (more than once when the padding
  // exceeds the dataset), or truncate; then take every num_replicas-th index.
  for (int64_t i = dataset_size_; i < total; ++i) order.push_back(order[i % dataset_size_]);
  std::vector<int64_t> out;
  out.reserve(num_samples_);
  for (int64_t i = rank_; i < total; i += num_replicas_) out.push_back(order[i]);
  return out;
}

}  // namespace data
}  // namespace loom
