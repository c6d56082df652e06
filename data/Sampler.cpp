#include "data/Sampler.h"

#include <numeric>

#include "tensor/Error.h"
#include "tensor/Generator.h"

namespace loom {
namespace data {

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  LOOM_CHECK(size >= 0, "SequentialSampler: size must be >= 0, got ", size);
}

std::vector<int64_t> SequentialSampler::indices() {
  std::vector<int64_t> out(size_);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

RandomSampler::RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  LOOM_CHECK(size >= 0, "RandomSampler: size must be >= 0, got ", size);
}

std::vector<int64_t> RandomSampler::indices() {
  std::vector<int64_t> out(size_);
  std::iota(out.begin(), out.end(), 0);
  Generator gen(seed_ + static_cast<uint64_t>(epoch_));
  for (int64_t i = size_ - 1; i > 0; --i) std::swap(out[i], out[gen.randint(0, i + 1)]);
  return out;
}

BatchSampler::BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  LOOM_CHECK(sampler_ != nullptr, "BatchSampler: sampler is null");
  LOOM_CHECK(batch_size > 0, "BatchSampler: batch_size should be a positive integer, got ",
             batch_size);
}

std::vector<std::vector<int64_t>> BatchSampler::batches() {
  const std::vector<int64_t> all = sampler_->indices();
  std::vector<std::vector<int64_t>> out;
  for (size_t start = 0; start < all.size(); start += batch_size_) {
    const size_t end = std::min(all.size(), start + static_cast<size_t>(batch_size_));
    if (drop_last_ && end - start < static_cast<size_t>(batch_size_)) break;
    out.emplace_back(all.begin() + start, all.begin() + end);
  }
  return out;
}

int64_t BatchSampler::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

}  // namespace data
}  // namespace loom
