#include "examples/model_parallel/PipelineParallelResNet50.h"

#include <exception>
#include <memory>
#include <vector>

#include "autograd/DeferWeightGrad.h"
#include "autograd/functions/Shape.h"
#include "tensor/Error.h"
#include "tensor/Stream.h"
#include "tensor/WeightReuse.h"

namespace loom {
namespace examples {

PipelineParallelResNet50Impl::PipelineParallelResNet50Impl(int64_t split_size, int64_t num_classes,
                                                           Device device0, Device device1)
    : ModelParallelResNet50Impl(num_classes, device0, device1), split_size_(1) {
  set_split_size(split_size);
}

void PipelineParallelResNet50Impl::set_split_size(int64_t split_size) {
  LOOM_CHECK(split_size >= 1, "PipelineParallelResNet50: split_size must be positive, got ",
             split_size);
  split_size_ = split_size;
}

std::vector<Tensor> PipelineParallelResNet50Impl::split_images(const Tensor& images,
                                                               const char* who) const {
  check_images(images, who);
  LOOM_CHECK(images.size(0) >= 1, who, ": expected at least one image, got ", images.describe());
  return images.split(split_size_, 0);
}

namespace {

// Waits for both streams (so no closure still uses the model) and rethrows
// the first error, device0's before device1's.
void synchronize_both(const Stream& first, const Stream& second) {
  std::exception_ptr error;
  try {
    first.synchronize();
  } catch (...) {
    error = std::current_exception();
  }
  try {
    second.synchronize();
  } catch (...) {
    if (!error) error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

Tensor PipelineParallelResNet50Impl::forward(const Tensor& images) {
  const std::vector<Tensor> splits = split_images(images, "PipelineParallelResNet50");
  const size_t n = splits.size();
  const Device dev0 = device0(), dev1 = device1();
  // Carried into the stream closures like grad mode.
  autograd::DeferWeightGradGuard defer(defer_weight_gradients());
  WeightReuseGuard reuse(reuse_weights());

  if (!dev0.is_cpu() || !dev1.is_cpu()) {
    // The tutorial's loop, verbatim: ops on the calling thread.
    std::vector<Tensor> outputs;
    Tensor s_prev = stage1(splits[0]).to(dev1);
    for (size_t i = 1; i < n; ++i) {
      outputs.push_back(stage2(s_prev));       // A. s_prev runs on device1
      s_prev = stage1(splits[i]).to(dev1);     // B. s_next runs on device0
    }
    outputs.push_back(stage2(s_prev));
    return cat(outputs, 0);
  }

  // features[i]: stage 1's output for micro-batch i (device0);
  // outputs[i]: its logits (device1).  Shared with the closures.
  auto features = std::make_shared<std::vector<Tensor>>(n);
  auto outputs = std::make_shared<std::vector<Tensor>>(n);
  const Stream compute0 = Stream::default_stream(dev0);
  const Stream compute1 = Stream::default_stream(dev1);
  // Device 1 waits for micro-batch 0: it makes its layers' weight copies for
  // this step's weights meanwhile (tensor/WeightReuse.h).
  if (reuse_weights()) compute1.submit([dev1] { prepare_kept_weights(dev1); });
  for (size_t i = 0; i < n; ++i) {
    const Tensor micro_batch = splits[i];
    compute0.submit([this, features, micro_batch, i] { (*features)[i] = stage1(micro_batch); });
    // device1 takes micro-batch i once device0 finished it; meanwhile device0
    // goes on with micro-batch i+1 (submitted in the next iteration).
    compute1.wait_event(compute0.record());
    compute1.submit([this, features, outputs, dev1, i] {
      Tensor moved = (*features)[i].to(dev1);  // hand-over copy, on the consumer's stream
      (*features)[i] = Tensor();               // device0's copy is held by autograd only
      (*outputs)[i] = stage2(moved);
    });
  }
  synchronize_both(compute0, compute1);
  return cat(*outputs, 0);
}

}  // namespace examples
}  // namespace loom
