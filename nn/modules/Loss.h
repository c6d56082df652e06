// Loss modules: forward(input, target) -> loss.
#pragma once

#include "autograd/functions/Loss.h"
#include "nn/Cloneable.h"
#include "nn/ModuleHolder.h"

namespace loom {
namespace nn {

struct CrossEntropyLossOptions {
  CrossEntropyLossOptions& reduction(Reduction v) { reduction_ = v; return *this; }
  CrossEntropyLossOptions& ignore_index(int64_t v) { ignore_index_ = v; return *this; }
  CrossEntropyLossOptions& label_smoothing(double v) { label_smoothing_ = v; return *this; }
  // Per-class weight (C); the module keeps a copy as its "weight" buffer.
  CrossEntropyLossOptions& weight(Tensor v) { weight_ = std::move(v); return *this; }
  Reduction reduction_ = Reduction::kMean;
  int64_t ignore_index_ = -100;
  double label_smoothing_ = 0.0;
  Tensor weight_;
};

// input (N, C) logits, target (N) class indices.
class CrossEntropyLossImpl : public Cloneable<CrossEntropyLossImpl> {
 public:
  explicit CrossEntropyLossImpl(CrossEntropyLossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target);
  void pretty_print(std::ostream& out) const override;
  CrossEntropyLossOptions options;
};
LOOM_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  NLLLossOptions& reduction(Reduction v) { reduction_ = v; return *this; }
  NLLLossOptions& ignore_index(int64_t v) { ignore_index_ = v; return *this; }
  // Per-class weight (C); the module keeps a copy as its "weight" buffer.
  NLLLossOptions& weight(Tensor v) { weight_ = std::move(v); return *this; }
  Reduction reduction_ = Reduction::kMean;
  int64_t ignore_index_ = -100;
  Tensor weight_;
};

// input (N, C) log-probabilities, target (N) class indices.
class NLLLossImpl : public Cloneable<NLLLossImpl> {
 public:
  explicit NLLLossImpl(NLLLossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target);
  NLLLossOptions options;
};
LOOM_MODULE(NLLLoss);

class MSELossImpl : public Cloneable<MSELossImpl> {
 public:
  explicit MSELossImpl(Reduction reduction = Reduction::kMean)
      : Cloneable("MSELoss"), reduction(reduction) {}
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target);
  Reduction reduction;
};
LOOM_MODULE(MSELoss);

}  // namespace nn
}  // namespace loom
