#include "nn/models/ResNet.h"

#include "autograd/functions/Elementwise.h"
#include "nn/Init.h"

namespace loom {
namespace nn {
namespace models {

namespace {
Conv2d conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}
Conv2d conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false));
}
Sequential make_downsample(int64_t in, int64_t out, int64_t stride) {
  return Sequential(conv1x1(in, out, stride), BatchNorm2d(out));
}
}  // namespace

// ---- BasicBlock -----------------------------------------------------------------

BasicBlockImpl::BasicBlockImpl(int64_t in_planes_, int64_t planes_, int64_t stride_, bool downsample_)
    : Cloneable("BasicBlock"), in_planes(in_planes_), planes(planes_), stride(stride_),
      has_downsample(downsample_) {
  reset();
}

void BasicBlockImpl::reset() {
  conv1 = register_module("conv1", conv3x3(in_planes, planes, stride));
  bn1 = register_module("bn1", BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", BatchNorm2d(planes));
  downsample = has_downsample
                   ? register_module("downsample", make_downsample(in_planes, planes, stride))
                   : Sequential(nullptr);
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  const Tensor out = bn1->forward_relu(conv1(x));
  const Tensor identity = has_downsample ? downsample(x) : x;
  return bn2->forward_add_relu(conv2(out), identity);
}

// ---- Bottleneck ----------------------------------------------------------------

BottleneckImpl::BottleneckImpl(int64_t in_planes_, int64_t planes_, int64_t stride_, bool downsample_)
    : Cloneable("Bottleneck"), in_planes(in_planes_), planes(planes_), stride(stride_),
      has_downsample(downsample_) {
  reset();
}

void BottleneckImpl::reset() {
  conv1 = register_module("conv1", conv1x1(in_planes, planes));
  bn1 = register_module("bn1", BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", BatchNorm2d(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * kExpansion));
  bn3 = register_module("bn3", BatchNorm2d(planes * kExpansion));
  downsample = has_downsample ? register_module("downsample", make_downsample(
                                                                  in_planes, planes * kExpansion, stride))
                              : Sequential(nullptr);
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1(x));
  out = bn2->forward_relu(conv2(out));
  const Tensor identity = has_downsample ? downsample(x) : x;
  return bn3->forward_add_relu(conv3(out), identity);
}

// ---- ResNet --------------------------------------------------------------------

ResNetImpl::ResNetImpl(ResNetOptions options_) : Cloneable("ResNet"), options(std::move(options_)) {
  LOOM_CHECK(options.layers_.size() == 4, "ResNet: expected 4 stage sizes, got ",
             options.layers_.size());
  LOOM_CHECK(options.num_classes_ > 0, "ResNet: num_classes must be positive, got ",
             options.num_classes_);
  reset();
}

Sequential ResNetImpl::make_layer(int64_t& in_planes, int64_t planes, int64_t blocks,
                                  int64_t stride) const {
  Sequential layer;
  const bool basic = options.block_ == BlockType::kBasic;
  const int64_t expansion = basic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
  const bool downsample = stride != 1 || in_planes != planes * expansion;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t s = i == 0 ? stride : 1;
    const bool ds = i == 0 && downsample;
    if (basic) layer->push_back(BasicBlock(in_planes, planes, s, ds));
    else layer->push_back(Bottleneck(in_planes, planes, s, ds));
    in_planes = planes * expansion;
  }
  return layer;
}

void ResNetImpl::reset() {
  conv1 = register_module("conv1", Conv2d(Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
  bn1 = register_module("bn1", BatchNorm2d(64));
  maxpool = register_module("maxpool", MaxPool2d(MaxPool2dOptions(3).stride(2).padding(1)));
  int64_t in_planes = 64;
  layer1 = register_module("layer1", make_layer(in_planes, 64, options.layers_[0], 1));
  layer2 = register_module("layer2", make_layer(in_planes, 128, options.layers_[1], 2));
  layer3 = register_module("layer3", make_layer(in_planes, 256, options.layers_[2], 2));
  layer4 = register_module("layer4", make_layer(in_planes, 512, options.layers_[3], 2));
  avgpool = register_module("avgpool", AdaptiveAvgPool2d(1));
  fc = register_module("fc", Linear(in_planes, options.num_classes_));
  // torchvision's init: He normal (fan_out) for convolutions, BN to identity.
  for (auto& m : modules()) {
    if (auto conv = std::dynamic_pointer_cast<Conv2dImpl>(m)) {
      init::kaiming_normal_(conv->weight, 0, init::FanMode::kFanOut, init::Nonlinearity::kReLU);
    } else if (auto bn = std::dynamic_pointer_cast<BatchNorm2dImpl>(m)) {
      init::ones_(bn->weight);
      init::zeros_(bn->bias);
    }
  }
}

Tensor ResNetImpl::forward(const Tensor& x) {
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 3,
             "ResNet: expected input of shape (N, 3, H, W), got ", x.describe());
  // Channels last from the stem on where the convolutions run so (oneDNN's
  // bfloat16 kernels on the CPU): the input converted once here, the
  // activations NHWC to the pooled features, the logits as usual.
  const Tensor in = conv1->runs_channels_last(x) ? x.contiguous(MemoryFormat::kChannelsLast) : x;
  Tensor out = maxpool(bn1->forward_relu(conv1(in)));  // (N, 64, H/4, W/4)
  out = layer1(out);
  out = layer2(out);
  out = layer3(out);
  out = layer4(out);                          // (N, 512 * expansion, H/32, W/32)
  out = avgpool(out).flatten(1);              // (N, 512 * expansion)
  return fc(out);                             // (N, num_classes)
}

ResNet resnet18(int64_t num_classes) {
  return ResNet(ResNetOptions(BlockType::kBasic, {2, 2, 2, 2}).num_classes(num_classes));
}
ResNet resnet34(int64_t num_classes) {
  return ResNet(ResNetOptions(BlockType::kBasic, {3, 4, 6, 3}).num_classes(num_classes));
}
ResNet resnet50(int64_t num_classes) {
  return ResNet(ResNetOptions(BlockType::kBottleneck, {3, 4, 6, 3}).num_classes(num_classes));
}

}  // namespace models
}  // namespace nn
}  // namespace loom
