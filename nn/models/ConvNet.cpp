#include "nn/models/ConvNet.h"

#include "nn/modules/Activation.h"
#include "nn/modules/BatchNorm.h"
#include "nn/modules/Conv.h"
#include "nn/modules/Pooling.h"

namespace loom {
namespace nn {
namespace models {

ConvNetImpl::ConvNetImpl(int64_t num_classes_) : Cloneable("ConvNet"), num_classes(num_classes_) {
  reset();
}

void ConvNetImpl::reset() {
  layer1 = register_module(
      "layer1", Sequential(Conv2d(Conv2dOptions(1, 16, 5).stride(1).padding(2)), BatchNorm2d(16),
                           ReLU(), MaxPool2d(MaxPool2dOptions(2).stride(2))));
  layer2 = register_module(
      "layer2", Sequential(Conv2d(Conv2dOptions(16, 32, 5).stride(1).padding(2)), BatchNorm2d(32),
                           ReLU(), MaxPool2d(MaxPool2dOptions(2).stride(2))));
  fc = register_module("fc", Linear(7 * 7 * 32, num_classes));
}

Tensor ConvNetImpl::forward(const Tensor& x) {
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
             "ConvNet: expected input of shape (N, 1, 28, 28), got ", x.describe());
  Tensor out = layer1(x);   // (N, 16, 14, 14)
  out = layer2(out);        // (N, 32, 7, 7)
  out = out.reshape({out.size(0), -1});  // (N, 1568)
  return fc(out);           // (N, num_classes)
}

}  // namespace models
}  // namespace nn
}  // namespace loom
