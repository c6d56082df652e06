// datasets::RandomClassification: synthetic inputs for benchmarks and tests
// (the tutorials' RandomClsDS).  Example i is drawn from Generator(seed + i),
// so any subset is reproducible regardless of order or worker.
#pragma once

#include "data/Dataset.h"

namespace loom {
namespace data {
namespace datasets {

class RandomClassification : public Dataset {
 public:
  // size examples of shape `shape` (standard normal) with labels in [0, num_classes).
  RandomClassification(int64_t size, IntList shape, int64_t num_classes, uint64_t seed = 0);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;

 private:
  int64_t size_;
  IntList shape_;
  int64_t num_classes_;
  uint64_t seed_;
};

}  // namespace datasets
}  // namespace data
}  // namespace loom
