#include "autograd/Checkpoint.h"

#include <mutex>

#include "autograd/Engine.h"
#include "autograd/GradMode.h"
#include "autograd/Node.h"
#include "tensor/Error.h"
#include "tensor/Generator.h"

namespace loom {
namespace autograd {

namespace {

thread_local int tls_recomputing = 0;

class RecomputingGuard {
 public:
  RecomputingGuard() { ++tls_recomputing; }
  ~RecomputingGuard() { --tls_recomputing; }
};

// Runs fn(input) with default_generator() seeded by `seed` on this thread.
Tensor run_with_seed(const CheckpointFn& fn, const Tensor& input, uint64_t seed) {
  Generator gen(seed);
  GeneratorGuard guard(&gen);
  Tensor out = fn(input);
  LOOM_CHECK(out.defined(), "checkpoint: the checkpointed function returned an undefined tensor");
  return out;
}

class CheckpointBackward final : public Node {
 public:
  CheckpointBackward(CheckpointFn fn, Tensor input, bool input_requires_grad, uint64_t seed)
      : fn_(std::move(fn)),
        input_(std::move(input)),
        input_requires_grad_(input_requires_grad),
        seed_(seed) {}

  std::string name() const override { return "CheckpointBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    LOOM_CHECK(input_.defined(), "checkpoint: backward through a checkpointed segment a "
               "second time, but its saved input was freed; use retain_graph=true");
    Tensor x = input_.detach();
    if (input_requires_grad_) x.requires_grad_();
    Tensor y;
    {
      AutoGradMode grad_on(true);
      RecomputingGuard recomputing;
      y = run_with_seed(fn_, x, seed_);
    }
    if (y.requires_grad()) backward({y}, {grads[0]});
    return {input_requires_grad_ ? x.grad() : Tensor()};
  }

  void release_saved() override {
    input_ = Tensor();
    fn_ = nullptr;
  }

 private:
  CheckpointFn fn_;
  Tensor input_;  // detached: the recomputation's leaf
  bool input_requires_grad_;
  uint64_t seed_;
};

}  // namespace

bool is_recomputing() { return tls_recomputing > 0; }

Tensor checkpoint(const CheckpointFn& fn, const Tensor& input,
                  const std::vector<Tensor>& parameters) {
  LOOM_CHECK(fn != nullptr, "checkpoint: the function is empty");
  LOOM_CHECK(input.defined(), "checkpoint: the input is undefined");
  const bool input_requires_grad = input.requires_grad() && GradMode::is_enabled();
  if (!input_requires_grad && !any_requires_grad(parameters)) return fn(input);

  uint64_t seed;
  {
    Generator& g = default_generator();
    std::lock_guard<std::mutex> lock(g.mutex());
    seed = g.next_u64();
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    // A new handle: fn may return its input (or a view of it), whose history
    // must stay as it is.
    out = run_with_seed(fn, input, seed).detach();
  }
  auto node =
      std::make_shared<CheckpointBackward>(fn, input.detach(), input_requires_grad, seed);
  set_history(node, {input}, {out});
  return out;
}

}  // namespace autograd
}  // namespace loom
