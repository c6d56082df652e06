// StreamPipelineResNet50: PipelineParallelResNet50 with the hand-over copy on
// device1's copy stream, so copying micro-batch i to device1 overlaps the
// computation of micro-batch i-1 there (the copy/compute streams).
//
// Per micro-batch i:
//   device0 compute stream:  features_i = stage1(x_i);      record e0_i
//   device1 copy stream:     wait e0_i;  moved_i = features_i.to(device1);  record c_i
//   device1 compute stream:  wait c_i;   logits_i = stage2(moved_i)
// The compute stream of device1 never spends time copying, and the copy of
// micro-batch i+1 can run while stage 2 of micro-batch i is still computing.
//
// On CPU logical devices the copy is a memcpy done by the copy stream's own
// worker thread.  It wins little when the copies are small next to the
// compute (ResNet-50's hand-over is N x 512 x H/8 x W/8 floats); the point is
// that it is never slower than the plain pipeline.  Results equal the plain
// pipeline's exactly (the copy is exact).
//
// On CUDA devices the three streams are CUDA streams (tensor/Stream.h): each
// closure runs on its stream's launcher thread and only queues kernels; the
// copy runs on device1's copy stream, ordered by CUDA events, and its memory
// is recorded on device1's compute stream (record_stream) so the allocator
// does not hand it out again while stage 2 may still read it.  With
// device0 == device1 (one GPU hosting both stages) the two compute streams
// are the same stream and the copy is a no-op.
#pragma once

#include <cstdint>

#include "examples/model_parallel/PipelineParallelResNet50.h"

namespace loom {
namespace examples {

class StreamPipelineResNet50Impl : public PipelineParallelResNet50Impl {
 public:
  // Throws for split_size < 1 or num_classes < 1.
  explicit StreamPipelineResNet50Impl(int64_t split_size = 20, int64_t num_classes = 1000,
                                      Device device0 = Device(kCPU, 0),
                                      Device device1 = Device(kCPU, 1));

  // As PipelineParallelResNet50::forward, with copies on device1's copy stream.
  Tensor forward(const Tensor& images) override;
};
LOOM_MODULE(StreamPipelineResNet50);

}  // namespace examples
}  // namespace loom
