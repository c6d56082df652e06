// ResNet-18/34/50 built like torchvision's, with the same parameter names
// (conv1, bn1, layer1.0.conv1.weight, layer2.0.downsample.0.weight, fc.bias,
// ...), so weights move between loom and PyTorch through safetensors.
//
// Input (N, 3, H, W) -> logits (N, num_classes); any H, W >= 32 works thanks
// to the adaptive average pool.
#pragma once

#include <vector>

#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"
#include "nn/modules/BatchNorm.h"
#include "nn/modules/Container.h"
#include "nn/modules/Conv.h"
#include "nn/modules/Linear.h"
#include "nn/modules/Pooling.h"

namespace loom {
namespace nn {
namespace models {

// Two 3x3 convolutions with a residual connection (ResNet-18/34).
class BasicBlockImpl : public Cloneable<BasicBlockImpl> {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride = 1, bool downsample = false);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  int64_t in_planes, planes, stride;
  bool has_downsample;
  Conv2d conv1{nullptr}, conv2{nullptr};
  BatchNorm2d bn1{nullptr}, bn2{nullptr};
  Sequential downsample{nullptr};
};
LOOM_MODULE(BasicBlock);

// 1x1 reduce, 3x3, 1x1 expand (x4), with a residual connection (ResNet-50);
// the stride sits on the 3x3 convolution as in torchvision v1.5.
class BottleneckImpl : public Cloneable<BottleneckImpl> {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in_planes, int64_t planes, int64_t stride = 1, bool downsample = false);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  int64_t in_planes, planes, stride;
  bool has_downsample;
  Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  Sequential downsample{nullptr};
};
LOOM_MODULE(Bottleneck);

enum class BlockType { kBasic, kBottleneck };

struct ResNetOptions {
  ResNetOptions(BlockType block, std::vector<int64_t> layers)
      : block_(block), layers_(std::move(layers)) {}
  ResNetOptions& num_classes(int64_t v) { num_classes_ = v; return *this; }
  BlockType block_;
  std::vector<int64_t> layers_;  // blocks per stage, e.g. {2, 2, 2, 2}
  int64_t num_classes_ = 1000;
};

class ResNetImpl : public Cloneable<ResNetImpl> {
 public:
  explicit ResNetImpl(ResNetOptions options);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  ResNetOptions options;
  Conv2d conv1{nullptr};
  BatchNorm2d bn1{nullptr};
  MaxPool2d maxpool{nullptr};
  Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  AdaptiveAvgPool2d avgpool{nullptr};
  Linear fc{nullptr};

 private:
  Sequential make_layer(int64_t& in_planes, int64_t planes, int64_t blocks, int64_t stride) const;
};
LOOM_MODULE(ResNet);

ResNet resnet18(int64_t num_classes = 1000);
ResNet resnet34(int64_t num_classes = 1000);
ResNet resnet50(int64_t num_classes = 1000);

}  // namespace models
}  // namespace nn
}  // namespace loom
