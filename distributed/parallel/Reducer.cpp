#include "distributed/parallel/Reducer.h"

#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autograd/Engine.h"
#include "autograd/GradMode.h"
#include "autograd/Node.h"
#include "tensor/Factory.h"

namespace loom {
namespace distributed {

using Clock = ReducerTimeline::Clock;

double ReducerTimeline::ms(Clock::time_point t) const {
  if (t.time_since_epoch().count() == 0) return -1.0;
  return std::chrono::duration<double, std::milli>(t - prepared).count();
}

struct Reducer::State : std::enable_shared_from_this<Reducer::State> {
  std::vector<Tensor> params;
  std::vector<std::string> names;
  ProcessGroupPtr group;
  bool find_unused = false;
  bool as_view = false;
  std::vector<Bucket> buckets;
  std::vector<std::pair<size_t, size_t>> where;  // param -> (bucket, slot)

  std::mutex mutex;
  // ---- one iteration (guarded by mutex) -----------------------------------
  bool armed = false;
  bool callback_queued = false;
  std::vector<char> ready;          // per parameter
  std::vector<char> locally_used;   // per parameter (find_unused)
  std::vector<char> had_grad;       // .grad was defined when marked unused
  std::vector<size_t> pending;      // per bucket: parameters not ready yet
  std::vector<WorkPtr> works;       // per bucket, once launched
  std::optional<DType> compress;    // the comm hook's wire dtype (float16/bfloat16)
  std::vector<Tensor> wires;        // per bucket under compression: what was all-reduced
  size_t next_launch = 0;
  std::shared_ptr<ReducerTimeline> timeline;  // shared with completion callbacks
  std::shared_ptr<std::mutex> timeline_mutex = std::make_shared<std::mutex>();
  ReducerTimeline last_timeline;

  void reset_iteration() {
    armed = false;
    callback_queued = false;
    ready.assign(params.size(), 0);
    locally_used.assign(params.size(), 0);
    had_grad.assign(params.size(), 0);
    pending.clear();
    for (const Bucket& b : buckets) pending.push_back(b.params.size());
    works.assign(buckets.size(), nullptr);
    wires.assign(buckets.size(), Tensor());
    next_launch = 0;
  }

  // Waits for every launched all-reduce, swallowing errors (cleanup only).
  static void drain(const std::vector<WorkPtr>& works) {
    for (const WorkPtr& w : works) {
      if (!w) continue;
      try {
        w->wait();
      } catch (...) {
      }
    }
  }

  // Issues the all-reduces of consecutive ready buckets.  Caller holds mutex.
  void launch_ready_buckets() {
    while (next_launch < buckets.size() && pending[next_launch] == 0) {
      const size_t b = next_launch++;
      {
        std::lock_guard<std::mutex> lock(*timeline_mutex);
        timeline->buckets[b].launched = Clock::now();
      }
      if (compress) {
        // PyTorch's fp16_compress_hook: convert, divide by the world size
        // (before the sum, so it cannot overflow), all-reduce, copy back.
        autograd::NoGradGuard no_grad;
        wires[b] = buckets[b].flat.to(*compress) / static_cast<double>(group->size());
        works[b] = group->all_reduce(wires[b], ReduceOp::Sum);
      } else {
        works[b] = group->all_reduce(buckets[b].flat, ReduceOp::Sum);
      }
      auto tl = timeline;
      auto tl_mutex = timeline_mutex;
      works[b]->on_completion([tl, tl_mutex, b] {
        std::lock_guard<std::mutex> lock(*tl_mutex);
        tl->buckets[b].finished = Clock::now();
      });
    }
  }

  // Marks parameter i ready with `grad` (undefined: zeros).  Caller holds mutex.
  void mark_ready(size_t i, const Tensor& grad) {
    const auto [b, slot] = where[i];
    Tensor& view = buckets[b].views[slot];
    if (grad.defined()) {
      if (!grad.is_same(view)) view.copy_(grad);
    } else {
      view.zero_();
    }
    ready[i] = 1;
    if (--pending[b] == 0) {
      std::lock_guard<std::mutex> lock(*timeline_mutex);
      timeline->buckets[b].ready = Clock::now();
    }
    launch_ready_buckets();
  }

  void on_gradient(size_t i, Tensor& variable);
  void finalize();
};

namespace {

// The hook each parameter carries; a named type so ~Reducer can find and
// remove exactly its own hooks.
struct ReducerHook {
  std::weak_ptr<Reducer::State> state;
  size_t index;
  void operator()(Tensor& variable) const {
    if (auto s = state.lock()) s->on_gradient(index, variable);
  }
};

}  // namespace

void Reducer::State::on_gradient(size_t i, Tensor& variable) {
  autograd::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex);
  if (!armed) return;  // no_sync(), or a backward DDP's forward did not prepare
  LOOM_CHECK(!ready[i], "DistributedDataParallel: parameter \"", names[i],
             "\" was marked ready twice in one iteration: it took part in two backward passes "
             "after one forward (e.g. backward with retain_graph twice, or a second "
             "loss), which DDP does not support; sum the losses and call backward once");
  if (!callback_queued) {
    std::weak_ptr<State> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto s = weak.lock()) s->finalize();
    });
    callback_queued = true;
  }
  locally_used[i] = 1;
  Tensor grad = variable.grad();
  if (as_view && grad.defined()) {
    const auto [b, slot] = where[i];
    Tensor& view = buckets[b].views[slot];
    if (!grad.is_same(view)) {
      // .grad was replaced (zero_grad(set_to_none), or first use): put the
      // gradient in the slot and make the slot .grad again.
      view.copy_(grad);
      variable.set_grad(view);
      grad = view;
    }
  }
  mark_ready(i, grad);
}

void Reducer::State::finalize() {
  autograd::NoGradGuard no_grad;
  std::unique_lock<std::mutex> lock(mutex);
  if (!armed) return;
  std::shared_ptr<ReducerTimeline> tl = timeline;
  {
    std::lock_guard<std::mutex> tlock(*timeline_mutex);
    tl->backward_end = Clock::now();
  }
  std::vector<size_t> missing;
  for (size_t i = 0; i < params.size(); ++i)
    if (!ready[i]) missing.push_back(i);
  std::vector<WorkPtr> launched = works;
  const std::vector<Tensor> sent = wires;
  if (!missing.empty()) {
    reset_iteration();
    lock.unlock();
    drain(launched);
    std::ostringstream list;
    for (size_t k = 0; k < missing.size(); ++k) list << (k ? ", " : "") << names[missing[k]];
    LOOM_FAIL("DistributedDataParallel: on rank ", group->rank(), ", ", missing.size(),
              " parameter(s) did not receive a gradient in this backward pass: ", list.str(),
              ". Their gradient buckets could not be all-reduced, so the gradients of this "
              "iteration are not synchronised. If parameters are unused in forward on purpose "
              "(or only on some ranks), construct DistributedDataParallel with "
              "find_unused_parameters = true; otherwise make sure every parameter takes part "
              "in computing the loss");
  }
  // Every bucket is ready, hence launched; wait for them (outside the lock).
  const std::vector<char> used = locally_used;
  const std::vector<char> before = had_grad;
  reset_iteration();
  lock.unlock();
  try {
    for (size_t b = 0; b < launched.size(); ++b) {
      launched[b]->wait();
      // Completion callbacks may run just after wait() returns.
      std::lock_guard<std::mutex> tlock(*timeline_mutex);
      auto& finished = tl->buckets[b].finished;
      if (finished.time_since_epoch().count() == 0) finished = Clock::now();
    }
  } catch (...) {
    drain(launched);
    throw;
  }
  std::vector<char> globally_used = used;
  if (find_unused) {
    // Which parameters some rank used: a parameter nobody used keeps an
    // undefined .grad, as when training on one process.
    // On the device the group communicates on (the buckets' GPU under nccl).
    std::vector<float> flags(params.size());
    for (size_t i = 0; i < params.size(); ++i) flags[i] = used[i] ? 1.0f : 0.0f;
    Tensor counts = tensor(flags, {static_cast<int64_t>(params.size())}, TensorOptions(kFloat32))
                        .to(group->device_for(buckets[0].device));
    group->all_reduce(counts, ReduceOp::Sum)->wait();
    const std::vector<float> c = counts.to_vector<float>();
    for (size_t i = 0; i < params.size(); ++i) globally_used[i] = c[i] > 0.5f;
  }
  const double scale = 1.0 / static_cast<double>(group->size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (sent[b].defined()) {
      buckets[b].flat.copy_(sent[b]);  // compressed: already divided
    } else {
      buckets[b].flat.mul_(scale);
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const auto [b, slot] = where[i];
    const Tensor& view = buckets[b].views[slot];
    Tensor grad = params[i].grad();
    if (!globally_used[i] && !before[i] && !grad.defined()) continue;
    if (as_view) {
      if (!grad.is_same(view)) params[i].set_grad(view);
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      params[i].set_grad(view.clone());
    }
  }
  std::lock_guard<std::mutex> tlock(*timeline_mutex);
  tl->reduced = Clock::now();
  last_timeline = *tl;
}

// ---- Reducer ------------------------------------------------------------------

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names,
                 const std::vector<std::vector<size_t>>& bucket_indices, ProcessGroupPtr group,
                 bool find_unused_parameters, bool gradient_as_bucket_view)
    : state_(std::make_shared<State>()) {
  LOOM_CHECK(group != nullptr, "Reducer: the process group is null");
  LOOM_CHECK(names.size() == params.size(), "Reducer: got ", params.size(),
             " parameters but ", names.size(), " names");
  State& s = *state_;
  s.params = std::move(params);
  s.names = std::move(names);
  s.group = std::move(group);
  s.find_unused = find_unused_parameters;
  s.as_view = gradient_as_bucket_view;
  s.where.assign(s.params.size(), {SIZE_MAX, 0});
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Tensor& p = s.params[i];
    LOOM_CHECK(p.defined() && p.is_leaf() && p.requires_grad(), "Reducer: parameter \"",
               s.names[i], "\" must be a leaf that requires grad, got ",
               p.defined() ? p.describe() : std::string("an undefined tensor"));
  }
  for (const auto& indices : bucket_indices) {
    for (size_t i : indices) {
      LOOM_CHECK(i < s.params.size(), "Reducer: bucket index ", i, " is out of range for ",
                 s.params.size(), " parameters");
      LOOM_CHECK(s.where[i].first == SIZE_MAX, "Reducer: parameter ", i,
                 " is in two buckets");
      s.where[i] = {s.buckets.size(), 0};
    }
    s.buckets.push_back(make_bucket(s.params, indices));
    for (size_t j = 0; j < indices.size(); ++j) s.where[indices[j]].second = j;
  }
  for (size_t i = 0; i < s.params.size(); ++i)
    LOOM_CHECK(s.where[i].first != SIZE_MAX, "Reducer: parameter \"", s.names[i],
               "\" is in no bucket");
  if (s.as_view) {
    autograd::NoGradGuard no_grad;
    for (size_t i = 0; i < s.params.size(); ++i) {
      Tensor grad = s.params[i].grad();
      if (!grad.defined()) continue;
      const auto [b, slot] = s.where[i];
      s.buckets[b].views[slot].copy_(grad);
      s.params[i].set_grad(s.buckets[b].views[slot]);
    }
  }
  s.timeline = std::make_shared<ReducerTimeline>();
  s.reset_iteration();
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].register_post_accumulate_grad_hook(ReducerHook{state_, i});
}

void Reducer::set_compression(std::optional<DType> wire) {
  LOOM_CHECK(!wire || is_reduced_float(*wire),
             "DistributedDataParallel: a compression hook sends float16 or bfloat16, got ",
             dtype_name(*wire));
  std::lock_guard<std::mutex> lock(state_->mutex);
  LOOM_CHECK(!state_->armed, "DistributedDataParallel: register the communication hook before "
             "the forward pass, not during an iteration");
  state_->compress = wire;
}

Reducer::~Reducer() {
  // Remove exactly this reducer's hooks; the parameters outlive it.
  for (const Tensor& p : state_->params) {
    auto& hooks = p.autograd_meta().post_accumulate_hooks;
    for (auto it = hooks.begin(); it != hooks.end();) {
      const ReducerHook* h = it->target<ReducerHook>();
      if (h && h->state.lock() == state_) it = hooks.erase(it);
      else ++it;
    }
  }
  std::vector<WorkPtr> works;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    works = state_->works;
    state_->armed = false;
  }
  State::drain(works);
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  State& s = *state_;
  autograd::NoGradGuard no_grad;
  std::vector<WorkPtr> stale;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    stale = s.works;
    s.reset_iteration();
  }
  // A backward that threw midway left its all-reduces behind.
  State::drain(stale);

  std::lock_guard<std::mutex> lock(s.mutex);
  s.timeline = std::make_shared<ReducerTimeline>();
  s.timeline->prepared = Clock::now();
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    s.timeline->buckets.emplace_back();
    s.timeline->buckets.back().bucket = b;
    s.timeline->buckets.back().bytes = s.buckets[b].nbytes();
  }
  s.armed = true;
  if (!s.find_unused) return;

  // Walk the graph from the outputs; every parameter whose accumulator is
  // not reached gets no gradient in this backward.
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < s.params.size(); ++i) index[s.params[i].impl()] = i;
  std::vector<char> reached(s.params.size(), 0);
  std::vector<autograd::Node*> stack;
  std::unordered_set<autograd::Node*> seen;
  for (const Tensor& out : outputs) {
    if (!out.defined()) continue;
    if (auto fn = out.grad_fn()) {
      if (seen.insert(fn.get()).second) stack.push_back(fn.get());
    } else if (out.requires_grad()) {
      auto it = index.find(out.impl());
      if (it != index.end()) reached[it->second] = 1;
    }
  }
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n)) {
      auto it = index.find(acc->variable().impl());
      if (it != index.end()) reached[it->second] = 1;
    }
    for (const autograd::Edge& e : n->next_edges())
      if (e.is_valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (reached[i]) continue;
    Tensor grad = s.params[i].grad();
    s.had_grad[i] = grad.defined();
    s.mark_ready(i, grad);
  }
}

void Reducer::disarm() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->armed = false;
}

const std::vector<Bucket>& Reducer::buckets() const { return state_->buckets; }

const std::vector<Tensor>& Reducer::parameters() const { return state_->params; }

ReducerTimeline Reducer::last_timeline() const {
  std::lock_guard<std::mutex> lock(*state_->timeline_mutex);
  return state_->last_timeline;
}

}  // namespace distributed
}  // namespace loom
