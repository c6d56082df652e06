#include "data/Dataset.h"

#include "autograd/GradMode.h"
#include "autograd/functions/Shape.h"

namespace loom {
namespace data {

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t i : indices) examples.push_back(get(i));
  return collate(examples);
}

Example collate(const std::vector<Example>& examples) {
  LOOM_CHECK(!examples.empty(), "collate: no examples to batch");
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> data, targets;
  for (const auto& e : examples) {
    data.push_back(e.data);
    if (e.target.defined()) targets.push_back(e.target);
  }
  Example batch;
  batch.data = stack(data, 0);
  if (!targets.empty()) {
    LOOM_CHECK(targets.size() == examples.size(), "collate: some examples have a target and some don't");
    batch.target = stack(targets, 0);
  }
  return batch;
}

}  // namespace data
}  // namespace loom
