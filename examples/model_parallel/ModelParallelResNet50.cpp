#include "examples/model_parallel/ModelParallelResNet50.h"

#include "nn/models/ResNet.h"
#include "nn/modules/Activation.h"
#include "tensor/Error.h"

namespace loom {
namespace examples {

ModelParallelResNet50Impl::ModelParallelResNet50Impl(int64_t num_classes, Device device0,
                                                     Device device1)
    : nn::Module("ModelParallelResNet50"), num_classes_(num_classes), device0_(device0),
      device1_(device1) {
  LOOM_CHECK(num_classes >= 1, "ModelParallelResNet50: num_classes must be positive, got ",
             num_classes);
  // Take torchvision's ResNet-50 apart: its children become ours under the
  // same names, so state_dict keys match nn::models::resnet50()'s.
  nn::models::ResNet net = nn::models::resnet50(num_classes);
  for (const auto& [name, child] : net->named_children()) register_child(name, child);

  seq1 = nn::Sequential();
  seq1->push_back("conv1", net->conv1.ptr());
  seq1->push_back("bn1", net->bn1.ptr());
  seq1->push_back("relu", nn::ReLU().ptr());
  seq1->push_back("maxpool", net->maxpool.ptr());
  seq1->push_back("layer1", net->layer1.ptr());
  seq1->push_back("layer2", net->layer2.ptr());
  seq2 = nn::Sequential();
  seq2->push_back("layer3", net->layer3.ptr());
  seq2->push_back("layer4", net->layer4.ptr());
  seq2->push_back("avgpool", net->avgpool.ptr());
  fc = net->fc;

  seq1->to(device0_);
  seq2->to(device1_);
  fc->to(device1_);
}

void ModelParallelResNet50Impl::check_images(const Tensor& images, const char* who) const {
  LOOM_CHECK(images.defined() && images.dim() == 4 && images.size(1) == 3, who,
             ": expected images of shape (N, 3, H, W), got ", images.describe());
  LOOM_CHECK(images.device() == device0_, who, ": expected images on ", device0_,
             " (the first stage's device), got them on ", images.device());
}

Tensor ModelParallelResNet50Impl::stage1(const Tensor& images) const { return seq1(images); }

Tensor ModelParallelResNet50Impl::stage2(const Tensor& features) const {
  return fc(seq2(features).flatten(1));
}

Tensor ModelParallelResNet50Impl::forward(const Tensor& images) {
  check_images(images, "ModelParallelResNet50");
  return stage2(stage1(images).to(device1_));
}

}  // namespace examples
}  // namespace loom
