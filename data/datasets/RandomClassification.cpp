#include "data/datasets/RandomClassification.h"

#include <cstring>

#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace data {
namespace datasets {

RandomClassification::RandomClassification(int64_t size, IntList shape, int64_t num_classes,
                                           uint64_t seed)
    : size_(size), shape_(std::move(shape)), num_classes_(num_classes), seed_(seed) {
  LOOM_CHECK(size >= 0, "RandomClassification: size must be >= 0, got ", size);
  LOOM_CHECK(num_classes > 0, "RandomClassification: num_classes must be positive, got ", num_classes);
  for (int64_t s : shape_)
    LOOM_CHECK(s > 0, "RandomClassification: invalid shape ", shape_str(shape_));
}

Example RandomClassification::get(int64_t index) const {
  LOOM_CHECK(index >= 0 && index < size_, "RandomClassification: index ", index,
             " is out of range for a dataset of ", size_);
  Generator gen(seed_ * 1000003ULL + static_cast<uint64_t>(index));
  Tensor target = scalar_tensor(gen.randint(0, num_classes_), kInt64);
  return {randn(shape_, kFloat32, &gen), target};
}

Example RandomClassification::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t per = numel_of(shape_);
  IntList batch_shape{b};
  batch_shape.insert(batch_shape.end(), shape_.begin(), shape_.end());
  Example out{empty(batch_shape), empty({b}, kInt64)};
  float* dst = out.data.data_ptr<float>();
  int64_t* dst_t = out.target.data_ptr<int64_t>();
  parallel_for(0, b, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      Example one = get(indices[i]);
      std::memcpy(dst + i * per, one.data.data_ptr<float>(), per * sizeof(float));
      dst_t[i] = one.target.item<int64_t>();
    }
  });
  return out;
}

}  // namespace datasets
}  // namespace data
}  // namespace loom
