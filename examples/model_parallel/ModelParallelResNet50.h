// ModelParallelResNet50: torchvision's ResNet-50 cut in two and placed on two
// devices, as in PyTorch's "Single-Machine Model Parallel Best Practices".
//
//   stage 1 on device0:  seq1 = conv1, bn1, relu, maxpool, layer1, layer2
//   stage 2 on device1:  seq2 = layer3, layer4, avgpool;  then flatten, fc
//
//   ModelParallelResNet50 model(1000, Device("cpu:0"), Device("cpu:1"));
//   Tensor logits = model(images);           // images on cpu:0, logits on cpu:1
//
// forward() is the tutorial's naive version: stage 1 runs, its output is
// copied to device1 (a differentiable .to()), stage 2 runs; while one device
// works the other idles.  Backward still runs each device's nodes on that
// device's engine thread, but the stages depend on each other, so there is
// nothing to overlap: PipelineParallelResNet50 (split into micro-batches) is
// what makes the two devices work at once.
//
// The modules are registered under torchvision's names (conv1, bn1, layer1.0.
// conv1.weight, ..., fc.bias), so state_dict() keys equal those of
// nn::models::resnet50() and weights move between the single-device model and
// every model-parallel variant with load_state_dict.  seq1 and seq2 are
// Sequentials sharing those modules (not registered a second time).
#pragma once

#include <cstdint>

#include "nn/Module.h"
#include "nn/ModuleHolder.h"
#include "nn/modules/Container.h"
#include "nn/modules/Linear.h"
#include "tensor/Device.h"

namespace loom {
namespace examples {

class ModelParallelResNet50Impl : public nn::Module {
 public:
  // A fresh ResNet-50 (torchvision's initialisation) with stage 1 on device0
  // and stage 2 on device1 (they may be equal).  Throws for num_classes < 1.
  explicit ModelParallelResNet50Impl(int64_t num_classes = 1000, Device device0 = Device(kCPU, 0),
                                     Device device1 = Device(kCPU, 1));

  // images (N, 3, H, W) on device0, H and W >= 32 -> logits (N, num_classes)
  // on device1.  Throws when images are not 4-D with 3 channels or sit on
  // another device.
  Tensor forward(const Tensor& images) override;

  // Stage 1: (N, 3, H, W) on device0 -> (N, 512, H/8, W/8) on device0.
  Tensor stage1(const Tensor& images) const;
  // Stage 2: (N, 512, H/8, W/8) on device1 -> logits (N, num_classes) on device1.
  Tensor stage2(const Tensor& features) const;

  Device device0() const { return device0_; }
  Device device1() const { return device1_; }
  int64_t num_classes() const { return num_classes_; }

  nn::Sequential seq1{nullptr};  // conv1, bn1, relu, maxpool, layer1, layer2 (device0)
  nn::Sequential seq2{nullptr};  // layer3, layer4, avgpool (device1)
  nn::Linear fc{nullptr};        // (device1)

 protected:
  // Throws unless images is (N, 3, H, W) on device0; `who` names the model.
  void check_images(const Tensor& images, const char* who) const;

 private:
  int64_t num_classes_;
  Device device0_, device1_;
};
LOOM_MODULE(ModelParallelResNet50);

}  // namespace examples
}  // namespace loom
