#include "distributed/horovod/DistributedOptimizer.h"

#include <cmath>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "autograd/GradMode.h"
#include "distributed/horovod/Basics.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace distributed {
namespace horovod {

struct DistributedOptimizer::State {
  std::vector<Tensor> params;      // the optimizer's parameters that require grad
  std::vector<std::string> labels;  // their names, for messages
  std::vector<std::string> names;   // their all-reduce names ("allreduce." + label)
  CompressorPtr compression;
  int passes = 1;
  ReduceOp op = Average;
  double predivide = 1.0;

  std::mutex mutex;
  // ---- one step (guarded by mutex) -------------------------------------------------
  std::vector<int> delay;       // backward passes still to come before the all-reduce starts
  std::vector<char> touched;    // a gradient arrived since the last step (Horovod's _handles key)
  std::vector<Handle> handles;  // the all-reduce, once started

  void reset_step() {
    delay.assign(params.size(), passes);
    touched.assign(params.size(), 0);
    handles.assign(params.size(), Handle());
  }

  size_t pending() const {
    size_t n = 0;
    for (char t : touched) n += t ? 1 : 0;
    return n;
  }

  // Starts parameter i's all-reduce (zeros when it has no gradient).  Caller
  // holds mutex.
  void launch(size_t i) {
    Tensor grad = params[i].grad();
    if (!grad.defined()) {
      grad = zeros(params[i].sizes(), TensorOptions(params[i].dtype()).device(params[i].device()));
      params[i].set_grad(grad);
    }
    const bool average = op == ReduceOp::Avg;
    handles[i] = allreduce_async_(grad, names[i], op, compression, average ? 1.0 / predivide : 1.0,
                                  average ? predivide : 1.0);
  }

  void on_gradient(size_t i) {
    autograd::NoGradGuard no_grad;
    std::lock_guard<std::mutex> lock(mutex);
    LOOM_CHECK(!touched[i] || delay[i] > 0, "hvd::DistributedOptimizer: the gradient of parameter \"",
               labels[i], "\" was computed more than "
               "backward_passes_per_step = ", passes, " time(s) before step(); increase "
               "backward_passes_per_step to accumulate gradients locally over more backward passes, "
               "or call step() (or synchronize()) after every ", passes, " backward pass(es)");
    touched[i] = 1;
    if (--delay[i] == 0) launch(i);
  }
};

namespace {

// The hook each parameter carries; a named type so the destructor removes
// exactly its own hooks.
struct OptimizerHook {
  std::weak_ptr<DistributedOptimizer::State> state;
  size_t index;
  void operator()(Tensor&) const {
    if (auto s = state.lock()) s->on_gradient(index);
  }
};

}  // namespace

DistributedOptimizer::DistributedOptimizer(optim::Optimizer& optimizer,
                                           const nn::OrderedDict<Tensor>& named_parameters,
                                           CompressorPtr compression, int backward_passes_per_step, ReduceOp op,
                                           double gradient_predivide_factor)
    : optimizer_(optimizer), state_(std::make_shared<State>()) {
  const char* who = "hvd::DistributedOptimizer";
  LOOM_CHECK(is_initialized(), who, ": hvd is not initialised; call hvd::init() first");
  LOOM_CHECK(compression != nullptr, who, ": compression is null; use hvd::Compression::none");
  LOOM_CHECK(backward_passes_per_step >= 1, who, ": backward_passes_per_step must be >= 1, got ",
             backward_passes_per_step);
  LOOM_CHECK(op == ReduceOp::Avg || op == ReduceOp::Sum, who, ": op must be hvd::Average or hvd::Sum, got ",
             distributed::to_string(op));
  LOOM_CHECK(std::isfinite(gradient_predivide_factor) && gradient_predivide_factor > 0, who,
             ": gradient_predivide_factor must be a positive number, got ", gradient_predivide_factor);
  LOOM_CHECK(gradient_predivide_factor == 1.0 || op == ReduceOp::Avg, who,
             ": gradient_predivide_factor other than 1 needs op hvd::Average");

  std::unordered_map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, t] : named_parameters.items())
    if (t.defined()) name_of.emplace(t.impl(), name);  // a tensor named twice keeps its first name

  State& s = *state_;
  s.compression = std::move(compression);
  s.passes = backward_passes_per_step;
  s.op = op;
  s.predivide = gradient_predivide_factor;
  size_t unnamed = 0;
  std::string first_unnamed;
  const auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t j = 0; j < groups[g].params.size(); ++j) {
      const Tensor& p = groups[g].params[j];
      std::string name;
      if (named_parameters.empty()) {
        name = "noname." + std::to_string(g) + "." + std::to_string(j);
      } else {
        auto it = name_of.find(p.impl());
        if (it == name_of.end()) {
          if (unnamed++ == 0)
            first_unnamed = "parameter " + std::to_string(j) + " of group " + std::to_string(g) +
                            ", shape " + shape_str(p.sizes());
          continue;
        }
        name = it->second;
      }
      if (!p.requires_grad()) continue;  // frozen: never reduced (Horovod's _requires_update)
      s.params.push_back(p);
      s.labels.push_back(name);
      s.names.push_back("allreduce." + name);
    }
  }
  LOOM_CHECK(unnamed == 0, who, ": named_parameters was given, but ", unnamed, " of the optimizer's "
             "parameters are not in it (the first: ", first_unnamed, "); pass the named_parameters() of "
             "the model the optimizer trains, or none at all");
  s.reset_step();
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].register_post_accumulate_grad_hook(OptimizerHook{state_, i});
}

DistributedOptimizer::~DistributedOptimizer() {
  for (const Tensor& p : state_->params) {
    auto& hooks = p.autograd_meta().post_accumulate_hooks;
    for (auto it = hooks.begin(); it != hooks.end();) {
      const OptimizerHook* h = it->target<OptimizerHook>();
      if (h && h->state.lock() == state_) it = hooks.erase(it);
      else ++it;
    }
  }
  std::vector<Handle> handles;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    handles = state_->handles;
  }
  for (const Handle& h : handles) {
    if (!h.defined()) continue;
    try {
      horovod::synchronize(h);
    } catch (...) {
    }
  }
}

void DistributedOptimizer::synchronize() {
  autograd::NoGradGuard no_grad;
  State& s = *state_;
  std::vector<Handle> handles;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    try {
      for (size_t i = 0; i < s.params.size(); ++i)
        if (!s.handles[i].defined()) s.launch(i);
    } catch (...) {
      error = std::current_exception();  // hvd stopped: wait for what was started, then throw
    }
    handles = s.handles;
  }
  for (const Handle& h : handles) {
    if (!h.defined()) continue;
    try {
      horovod::synchronize(h);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.reset_step();
  }
  synchronized_ = !error;
  if (error) std::rethrow_exception(error);
}

void DistributedOptimizer::step() {
  if (should_synchronize_) {
    if (synchronized_) {
      LOOM_CHECK(state_->op == ReduceOp::Avg, "hvd::DistributedOptimizer::step: synchronize() was called "
                 "before step() outside skip_synchronize(), so step() would sum the already summed "
                 "gradients again; call step() inside `auto guard = optimizer.skip_synchronize();` after "
                 "synchronize()");
      if (!warned_double_sync_) {
        std::fprintf(stderr, "hvd warning: DistributedOptimizer::step() called after synchronize() outside "
                             "skip_synchronize(): the gradients are all-reduced twice, which is slower; "
                             "use `auto guard = optimizer.skip_synchronize();` around step()\n");
        warned_double_sync_ = true;
      }
    }
    synchronize();
  }
  synchronized_ = false;
  optimizer_.step();
}

void DistributedOptimizer::zero_grad(bool set_to_none) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const size_t pending = s.pending();
    size_t first = 0;
    while (first < s.touched.size() && !s.touched[first]) ++first;
    LOOM_CHECK(pending == 0, "hvd::DistributedOptimizer::zero_grad: called after backward() produced the "
               "gradients of ", pending, " parameter(s) (the first: \"",
               pending ? s.labels[first] : std::string(),
               "\") but before step() or synchronize(); their all-reduces are pending (or, with "
               "backward_passes_per_step = ", s.passes, ", still accumulating), and clearing the "
               "gradients now would race with them. Call step() (or synchronize()) first, then zero_grad()");
  }
  optimizer_.zero_grad(set_to_none);
}

int DistributedOptimizer::backward_passes_per_step() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->passes;
}

void DistributedOptimizer::set_backward_passes_per_step(int passes) {
  LOOM_CHECK(passes >= 1, "hvd::DistributedOptimizer::set_backward_passes_per_step: must be >= 1, got ",
             passes);
  std::lock_guard<std::mutex> lock(state_->mutex);
  LOOM_CHECK(state_->pending() == 0, "hvd::DistributedOptimizer::set_backward_passes_per_step: gradients "
             "of this step are pending; call step() or synchronize() first");
  state_->passes = passes;
  state_->reset_step();
}

std::vector<std::string> DistributedOptimizer::parameter_names() const { return state_->names; }

DistributedOptimizer::SkipSynchronizeGuard::SkipSynchronizeGuard(DistributedOptimizer* optimizer)
    : optimizer_(optimizer), previous_(optimizer->should_synchronize_) {
  optimizer_->should_synchronize_ = false;
}

DistributedOptimizer::SkipSynchronizeGuard::SkipSynchronizeGuard(SkipSynchronizeGuard&& other) noexcept
    : optimizer_(other.optimizer_), previous_(other.previous_) {
  other.optimizer_ = nullptr;
}

DistributedOptimizer::SkipSynchronizeGuard::~SkipSynchronizeGuard() {
  if (optimizer_) optimizer_->should_synchronize_ = previous_;
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
