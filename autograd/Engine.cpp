#include "autograd/Engine.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <pthread.h>

#include "autograd/GradMode.h"
#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/Stream.h"
#include "tensor/ShapeUtil.h"
#include "tensor/ThreadName.h"

namespace loom {
namespace autograd {
namespace {

struct GraphTask;

struct NodeTask {
  std::shared_ptr<GraphTask> task;
  std::shared_ptr<Node> node;
  std::vector<Tensor> inputs;
};

// Later nodes first: backward runs roughly in reverse order of forward, and
// leaves' accumulators (sequence_nr = max) as soon as they are ready.
struct LaterFirst {
  bool operator()(const NodeTask& a, const NodeTask& b) const {
    return a.node->sequence_nr() < b.node->sequence_nr();
  }
};

// The ready nodes of one thread.  Deferred nodes (autograd/DeferWeightGrad.h)
// wait apart and run only when no other node is ready; then the latest one
// runs together with every ready deferred node of the same backward pass that
// has the same next edges and that it coalesces with (Node::coalesces_with):
// the weight gradients of a layer over all micro-batches in one product.
class ReadyQueue {
 public:
  void push(NodeTask task) {
    if (task.node->is_deferred()) {
      deferred_.push_back(std::move(task));
    } else {
      ready_.push(std::move(task));
    }
  }
  bool empty() const { return ready_.empty() && deferred_.empty(); }
  // The next node to run, or a group of deferred nodes to run as one (the
  // first is the one whose apply_coalesced runs).  Call only when !empty().
  std::vector<NodeTask> pop() {
    std::vector<NodeTask> group;
    if (!ready_.empty()) {
      group.push_back(ready_.top());
      ready_.pop();
      return group;
    }
    size_t lead = 0;
    for (size_t i = 1; i < deferred_.size(); ++i)
      if (deferred_[i].node->sequence_nr() > deferred_[lead].node->sequence_nr()) lead = i;
    group.push_back(std::move(deferred_[lead]));
    deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(lead));
    const std::shared_ptr<GraphTask> task = group.front().task;
    const std::shared_ptr<Node> lead_node = group.front().node;
    for (size_t i = 0; i < deferred_.size();) {
      const NodeTask& other = deferred_[i];
      if (other.task == task && same_edges(*other.node, *lead_node) &&
          lead_node->coalesces_with(*other.node)) {
        group.push_back(std::move(deferred_[i]));
        deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    return group;
  }

 private:
  static bool same_edges(const Node& a, const Node& b) {
    const auto& ea = a.next_edges();
    const auto& eb = b.next_edges();
    if (ea.size() != eb.size()) return false;
    for (size_t i = 0; i < ea.size(); ++i)
      if (ea[i].node != eb[i].node || ea[i].input_nr != eb[i].input_nr) return false;
    return true;
  }

  std::priority_queue<NodeTask, std::vector<NodeTask>, LaterFirst> ready_;
  std::vector<NodeTask> deferred_;
};

// The seed of a backward pass: forwards the root gradients along its edges.
class GraphRoot final : public Node {
 public:
  explicit GraphRoot(std::vector<Tensor> grads) : grads_(std::move(grads)) {}
  std::string name() const override { return "GraphRoot"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return grads_; }

 private:
  std::vector<Tensor> grads_;
};

struct GraphTask {
  bool keep_graph = false;
  bool create_graph = false;
  bool exec_all = true;  // false for grad(): run only what leads to a capture
  Device owner;          // nodes on this device run on the calling thread

  std::mutex mutex;
  std::condition_variable cv;
  ReadyQueue local;  // ready nodes for the calling thread
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_set<Node*> needed;  // when !exec_all
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  std::vector<Tensor> captured;
  int outstanding = 0;
  std::exception_ptr error;
  // queue_callback()'s functions, run in order after the pass succeeded.
  std::vector<std::function<void()>> final_callbacks;
};

// The graph task whose node (or final callback) this thread is running, for
// queue_callback().  Saved and restored, so a reentrant backward nests.
thread_local GraphTask* tls_current_task = nullptr;

class CurrentTaskGuard {
 public:
  explicit CurrentTaskGuard(GraphTask* task) : saved_(tls_current_task) {
    tls_current_task = task;
  }
  ~CurrentTaskGuard() { tls_current_task = saved_; }

 private:
  GraphTask* saved_;
};

// One engine thread per non-caller device, serving that device's ready queue.
class DeviceWorker {
 public:
  explicit DeviceWorker(Device device) : device_(device) {
    std::thread([this] { loop(); }).detach();
  }
  void push(NodeTask task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void loop();
  Device device_;
  std::mutex mutex_;
  std::condition_variable cv_;
  ReadyQueue queue_;
};

// The device workers of this process.  Leaked on purpose: worker threads
// live for the whole process.  A child forked after workers started has none
// of their threads, so the fork handler gives it a fresh, empty map (the
// parent's entries are abandoned, not freed: their mutexes may be held).
// Abandoned maps stay reachable from g_abandoned_workers, so LeakSanitizer
// in a forked child (death tests, spawn) does not report them.
std::mutex* g_workers_mutex = new std::mutex();
std::map<Device, DeviceWorker*>* g_workers = new std::map<Device, DeviceWorker*>();
struct AbandonedWorkers {
  std::mutex* mutex;
  std::map<Device, DeviceWorker*>* workers;
  AbandonedWorkers* next;
};
AbandonedWorkers* g_abandoned_workers = nullptr;

void reset_workers_in_child() {
  g_abandoned_workers = new AbandonedWorkers{g_workers_mutex, g_workers, g_abandoned_workers};
  g_workers_mutex = new std::mutex();
  g_workers = new std::map<Device, DeviceWorker*>();
}

const bool g_workers_fork_handler = [] {
  pthread_atfork(nullptr, nullptr, reset_workers_in_child);
  return true;
}();

DeviceWorker& worker_for(Device device) {
  (void)g_workers_fork_handler;
  std::lock_guard<std::mutex> lock(*g_workers_mutex);
  auto* workers = g_workers;
  auto it = workers->find(device);
  if (it == workers->end()) it = workers->emplace(device, new DeviceWorker(device)).first;
  return *it->second;
}

// Hands a ready node to the thread of its device.  Caller holds task.mutex.
void route(GraphTask& task, NodeTask nt) {
  ++task.outstanding;
  if (nt.node->device() == task.owner) {
    task.local.push(std::move(nt));
    task.cv.notify_all();
  } else {
    Device device = nt.node->device();
    worker_for(device).push(std::move(nt));
  }
}

bool should_run(const GraphTask& task, Node* node) {
  return task.exec_all || task.needed.count(node) > 0;
}

// A node's gradient for its i-th next edge, checked against the tensor it
// belongs to (shape, device) and returned in that tensor's dtype: as in
// PyTorch's engine, a gradient computed in another dtype (a 16-bit gradient
// times dropout's float32 mask, say) is converted, so every tensor's
// gradient has its dtype.  Under create_graph the conversion is recorded.
Tensor validated_gradient(const Node& node, size_t i, Tensor grad, const OutputMeta& expected) {
  LOOM_CHECK(grad.sizes() == expected.sizes, "Function ", node.name(),
             " returned an invalid gradient at index ", i, " - got ", shape_str(grad.sizes()),
             " but expected shape compatible with ", shape_str(expected.sizes));
  LOOM_CHECK(grad.device() == expected.device, "Function ", node.name(),
             " returned a gradient at index ", i, " on ", grad.device(), " but expected ",
             expected.device);
  if (grad.dtype() != expected.dtype) grad = grad.to(expected.dtype);
  return grad;
}

// The incoming gradients of a node about to run: its pre-hooks applied and
// missing ones filled with zeros.
void prepare_inputs(Node& node, std::vector<Tensor>& grads) {
  grads.resize(node.outputs().size());
  for (const auto& [output_nr, hooks] : node.pre_hooks()) {
    if (output_nr >= grads.size() || !grads[output_nr].defined()) continue;
    for (const auto& hook : hooks) {
      Tensor replaced = hook(grads[output_nr]);
      if (replaced.defined()) grads[output_nr] = replaced;
    }
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) continue;
    const OutputMeta& m = node.outputs()[i];
    grads[i] = zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
  }
}

// Adds a gradient into a node's input buffer slot.  In place when the slot
// holds the only reference to a dense buffer (no weight-sized temporary per
// extra contribution); out of place otherwise, and always when the pass
// records a graph of its own (create_graph).
void accumulate(Tensor& slot, const Tensor& grad, bool create_graph) {
  if (!slot.defined()) {
    slot = grad;
    return;
  }
  // Dense: contiguous, or channels last (the layout it suggests).
  const bool sole = slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 &&
                    slot.is_contiguous(slot.suggest_memory_format()) && !slot.requires_grad();
  if (sole && !create_graph && slot.dtype() == grad.dtype()) {
    NoGradGuard no_grad;
    slot.add_(grad);
  } else {
    slot = slot + grad;
  }
}

// Runs one node, or a group of deferred nodes as one (ReadyQueue::pop), and
// passes the gradients on.  In a group, the first node returns the gradients
// of the whole group and the others none.  Never throws: errors are stored in
// the task and end the pass.
void evaluate(std::vector<NodeTask> group) {
  GraphTask& task = *group.front().task;
  Node& node = *group.front().node;
  bool failed;
  {
    std::lock_guard<std::mutex> lock(task.mutex);
    failed = task.error != nullptr;
  }
  std::vector<Tensor> outputs;
  if (!failed) {
    try {
      CurrentTaskGuard current(&task);
      AutoGradMode mode(task.create_graph);
      for (NodeTask& nt : group) prepare_inputs(*nt.node, nt.inputs);
      if (group.size() == 1) {
        outputs = node.apply(std::move(group.front().inputs));
      } else {
        std::vector<Node*> nodes;
        std::vector<std::vector<Tensor>> grads;
        for (NodeTask& nt : group) {
          nodes.push_back(nt.node.get());
          grads.push_back(std::move(nt.inputs));
        }
        outputs = node.apply_coalesced(nodes, std::move(grads));
      }
      if (!task.keep_graph)
        for (NodeTask& nt : group) nt.node->release_saved();
      const auto& edges = node.next_edges();
      LOOM_CHECK(outputs.size() == edges.size() || edges.empty(), "Function ", node.name(),
                 " returned ", outputs.size(), " gradients but expected ", edges.size());
      for (size_t i = 0; i < edges.size(); ++i) {
        if (!edges[i].is_valid() || !outputs[i].defined()) continue;
        outputs[i] = validated_gradient(node, i, std::move(outputs[i]),
                                        edges[i].node->outputs()[edges[i].input_nr]);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(task.mutex);
      if (!task.error) task.error = std::current_exception();
      failed = true;
    }
  }

  std::lock_guard<std::mutex> lock(task.mutex);
  try {
    for (size_t k = 0; k < group.size() && !failed && !task.error; ++k) {
      const NodeTask& nt = group[k];
      const auto& edges = nt.node->next_edges();
      for (size_t i = 0; i < edges.size(); ++i) {
        const Edge& e = edges[i];
        if (!e.is_valid()) continue;
        Node* next = e.node.get();
        auto dep = task.dependencies.find(next);
        if (dep == task.dependencies.end()) continue;
        auto& buffer = task.buffers[next];
        buffer.resize(next->outputs().size());
        if (k == 0 && outputs[i].defined())
          accumulate(buffer[e.input_nr], outputs[i], task.create_graph);
        if (--dep->second > 0) continue;
        std::vector<Tensor> ready = std::move(buffer);
        task.buffers.erase(next);
        auto cap = task.captures.find(next);
        if (cap != task.captures.end())
          for (const auto& [slot, index] : cap->second) task.captured[index] = ready[slot];
        if (should_run(task, next)) route(task, NodeTask{nt.task, e.node, std::move(ready)});
      }
    }
  } catch (...) {
    if (!task.error) task.error = std::current_exception();
  }
  task.outstanding -= static_cast<int>(group.size());
  if (task.outstanding == 0) task.cv.notify_all();
}

void DeviceWorker::loop() {
  // A CPU logical device computes with its share of the cores (the same
  // share its streams use, tensor/Stream.h), so two devices' backward
  // passes do not oversubscribe the machine.
  set_current_thread_name("loom-bwd-" + device_.str());
  if (device_.is_cpu()) set_thread_num_threads(device_num_threads(device_));
  while (true) {
    std::vector<NodeTask> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty(); });
      next = queue_.pop();
    }
    evaluate(std::move(next));
  }
}

// Counts, for every node reachable from root, how many edges point at it;
// marks the nodes that lead to a capture when not exec_all.
void compute_dependencies(GraphTask& task, Node* root) {
  std::vector<Node*> stack{root};
  std::unordered_set<Node*> seen{root};
  std::vector<Node*> order;  // discovery order, for the "needed" pass
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      ++task.dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  if (task.exec_all) return;
  // A node is needed when an edge leads to a capture or to a needed node.
  // Iterate to a fixed point (graphs are DAGs; this converges quickly).
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      if (task.needed.count(n)) continue;
      for (const Edge& e : n->next_edges()) {
        if (!e.is_valid()) continue;
        if (task.captures.count(e.node.get()) || task.needed.count(e.node.get())) {
          task.needed.insert(n);
          changed = true;
          break;
        }
      }
    }
  }
}

// Runs the queued callbacks on the calling thread once every node has run;
// a callback may queue more (they run too).  The first error is rethrown.
void run_final_callbacks(GraphTask& task) {
  CurrentTaskGuard current(&task);
  for (size_t i = 0;; ++i) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(task.mutex);
      if (i >= task.final_callbacks.size()) break;
      fn = std::move(task.final_callbacks[i]);
    }
    fn();
  }
}

std::vector<Tensor> run(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                        bool keep_graph, bool create_graph, const std::vector<Tensor>* inputs) {
  LOOM_CHECK(!roots.empty(), "backward: no tensors to differentiate");
  LOOM_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "backward: got ",
             roots.size(), " tensors but ", grad_roots.size(), " gradients");
  std::vector<Tensor> seeds;
  std::vector<Tensor> seed_inputs;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    LOOM_CHECK(r.defined(), "backward: tensor ", i, " is undefined");
    LOOM_CHECK(r.requires_grad(), "backward: element ", i,
               " of tensors does not require grad and does not have a grad_fn ",
               r.describe());
    Tensor g = i < grad_roots.size() ? grad_roots[i] : Tensor();
    if (!g.defined()) {
      LOOM_CHECK(r.numel() == 1, "backward: grad can be implicitly created only for scalar "
                 "outputs; pass a gradient for ", r.describe());
      g = ones_like(r);
    }
    LOOM_CHECK(g.sizes() == r.sizes(), "backward: gradient ", g.describe(),
               " does not match the shape of tensor ", r.describe());
    LOOM_CHECK(g.device() == r.device(), "backward: gradient is on ", g.device(),
               " but the tensor is on ", r.device());
    seeds.push_back(g);
    seed_inputs.push_back(r);
  }

  auto task = std::make_shared<GraphTask>();
  task->keep_graph = keep_graph;
  task->create_graph = create_graph;
  task->owner = roots[0].device();
  auto root = std::make_shared<GraphRoot>(seeds);
  for (const Tensor& r : seed_inputs) root->next_edges().push_back(gradient_edge(r));
  root->set_device(task->owner);

  if (inputs) {
    task->exec_all = false;
    task->captured.resize(inputs->size());
    for (size_t i = 0; i < inputs->size(); ++i) {
      const Tensor& in = (*inputs)[i];
      LOOM_CHECK(in.defined() && in.requires_grad(), "grad: input ", i,
                 " does not require grad ", in.defined() ? in.describe() : "(undefined)");
      Edge e = gradient_edge(in);
      task->captures[e.node.get()].push_back({e.input_nr, i});
    }
  }
  compute_dependencies(*task, root.get());
  {
    std::lock_guard<std::mutex> lock(task->mutex);
    route(*task, NodeTask{task, root, {}});
  }
  while (true) {
    std::vector<NodeTask> next;
    {
      std::unique_lock<std::mutex> lock(task->mutex);
      task->cv.wait(lock, [&] { return !task->local.empty() || task->outstanding == 0; });
      if (task->local.empty()) break;
      next = task->local.pop();
    }
    evaluate(std::move(next));
  }
  if (task->error) std::rethrow_exception(task->error);
  run_final_callbacks(*task);
  return std::move(task->captured);
}

}  // namespace

void queue_callback(std::function<void()> fn) {
  LOOM_CHECK(fn != nullptr, "queue_callback: the callback is empty");
  GraphTask* task = tls_current_task;
  LOOM_CHECK(task != nullptr, "queue_callback: no backward pass is running on this thread; "
             "call it from a hook or a node's backward rule");
  std::lock_guard<std::mutex> lock(task->mutex);
  task->final_callbacks.push_back(std::move(fn));
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
              bool retain_graph, bool create_graph) {
  run(roots, grad_roots, retain_graph || create_graph, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Tensor> result =
      run(outputs, grad_outputs, retain_graph || create_graph, create_graph, &inputs);
  for (size_t i = 0; i < result.size(); ++i) {
    LOOM_CHECK(allow_unused || result[i].defined(), "grad: input ", i, " ",
               inputs[i].describe(),
               " appears to not have been used in the graph; pass allow_unused=true if "
               "this is the desired behavior");
  }
  return result;
}

}  // namespace autograd
}  // namespace loom
