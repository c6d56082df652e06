#include "examples/model_parallel/StreamPipelineResNet50.h"

#include <exception>
#include <memory>
#include <vector>

#include "autograd/DeferWeightGrad.h"
#include "autograd/functions/Shape.h"
#include "tensor/CudaMemory.h"
#include "tensor/Stream.h"
#include "tensor/WeightReuse.h"

namespace loom {
namespace examples {

StreamPipelineResNet50Impl::StreamPipelineResNet50Impl(int64_t split_size, int64_t num_classes,
                                                       Device device0, Device device1)
    : PipelineParallelResNet50Impl(split_size, num_classes, device0, device1) {}

Tensor StreamPipelineResNet50Impl::forward(const Tensor& images) {
  const std::vector<Tensor> splits = split_images(images, "StreamPipelineResNet50");
  const size_t n = splits.size();
  const Device dev1 = device1();
  // Carried into the stream closures like grad mode.
  autograd::DeferWeightGradGuard defer(defer_weight_gradients());
  WeightReuseGuard reuse(reuse_weights());

  auto features = std::make_shared<std::vector<Tensor>>(n);  // stage 1 outputs (device0)
  auto moved = std::make_shared<std::vector<Tensor>>(n);     // the same on device1
  auto outputs = std::make_shared<std::vector<Tensor>>(n);   // logits (device1)
  const Stream compute0 = Stream::default_stream(device0());
  const Stream copy1 = Stream::copy_stream(dev1);
  const Stream compute1 = Stream::default_stream(dev1);
  // Device 1 waits for micro-batch 0: it makes its layers' weight copies for
  // this step's weights meanwhile (tensor/WeightReuse.h).
  if (reuse_weights()) compute1.submit([dev1] { prepare_kept_weights(dev1); });
  for (size_t i = 0; i < n; ++i) {
    const Tensor micro_batch = splits[i];
    compute0.submit([this, features, micro_batch, i] { (*features)[i] = stage1(micro_batch); });
    copy1.wait_event(compute0.record());
    copy1.submit([features, moved, dev1, compute1, i] {
      (*moved)[i] = (*features)[i].to(dev1);
      (*features)[i] = Tensor();
      // On a GPU the copy's memory comes from copy1's pool but is read on
      // compute1: keep it from reuse until compute1 is done with it.
      if (dev1.is_cuda() && (*moved)[i].storage().data() != nullptr)
        cuda::record_stream((*moved)[i].storage(), compute1.native_handle());
    });
    compute1.wait_event(copy1.record());
    compute1.submit([this, moved, outputs, i] {
      (*outputs)[i] = stage2((*moved)[i]);
      (*moved)[i] = Tensor();
    });
  }
  // Wait for all three (nothing may still use the model), first error wins.
  std::exception_ptr error;
  for (const Stream* s : {&compute0, &copy1, &compute1}) {
    try {
      s->synchronize();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return cat(*outputs, 0);
}

}  // namespace examples
}  // namespace loom
