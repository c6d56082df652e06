// The ConvNet of PyTorch's DDP/MNIST tutorials, with the same parameter names:
//   layer1: Conv2d(1, 16, 5, padding 2) + BatchNorm2d(16) + ReLU + MaxPool2d(2)
//   layer2: Conv2d(16, 32, 5, padding 2) + BatchNorm2d(32) + ReLU + MaxPool2d(2)
//   fc:     Linear(7 * 7 * 32, num_classes)
// Input (N, 1, 28, 28) -> logits (N, num_classes).
#pragma once

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"
#include "nn/modules/Container.h"
#include "nn/modules/Linear.h"

namespace loom {
namespace nn {
namespace models {

class ConvNetImpl : public Cloneable<ConvNetImpl> {
 public:
  explicit ConvNetImpl(int64_t num_classes = 10);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  int64_t num_classes;
  Sequential layer1{nullptr}, layer2{nullptr};
  Linear fc{nullptr};
};
LOOM_MODULE(ConvNet);

}  // namespace models
}  // namespace nn
}  // namespace loom
