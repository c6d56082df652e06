// ProcessGroupGloo's collectives: each checks its arguments in the calling
// thread (checks shared with nccl: distributed/CollectiveChecks.h,
// GatherScatter.h), describes itself in a Task (its signature for the
// consistency check, the memory it touches, how to run it with Gloo and,
// where it can, how to complete from every rank's bytes on the small-message
// path) and queues it (gloo/Worker.cpp).  Tensors reach Gloo through host
// memory as gloo/HostStaging.h describes.
//
// reduce_scatter is an all-reduce of the concatenated inputs followed by a
// copy of this rank's chunk (Gloo 0.5 has no reduce-scatter for unbound
// buffers); it moves about as many bytes as a ring reduce-scatter would.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <cstring>
#include <utility>

#include "distributed/GatherScatter.h"
#include "distributed/gloo/GlooState.h"
#include "distributed/gloo/HostStaging.h"
#include "distributed/gloo/ReduceFunctions.h"

namespace loom {
namespace distributed {

using namespace gloo_glue;

namespace {

using Task = ProcessGroupGloo::Task;

// A task for a collective of `kind` whose per-rank tensor is t (its dtype and
// element count go into the signature), with root for those that have one.
std::shared_ptr<Task> new_task(Kind kind, const Tensor& t, int root = -1) {
  auto task = std::make_shared<Task>();
  task->sig.kind = kind;
  task->sig.dtype = static_cast<int64_t>(t.dtype());
  task->sig.numel = t.numel();
  task->sig.root = root;
  return task;
}

// Records the bytes t occupies (ordering across workers, gloo/Worker.cpp)
// and, for a CUDA tensor, an event on the caller's current stream that the
// worker waits for before staging it.
void add_memory(Task& task, const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return;
  if (t.is_cuda()) task.ready.push_back(current_stream(t.device()).record());
  const char* p = static_cast<const char*>(t.data_ptr());
  task.memory.emplace_back(p, p + t.nbytes());
}
void add_memory(Task& task, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) add_memory(task, t);
}

// Calls fn(TypeTag<T>{}) with the type gloo moves for `dtype`: the dtype's
// own, or uint16_t for float16/bfloat16 (gloo only needs their size: the
// reduce functions, ReduceFunctions.cpp, do the arithmetic).
template <typename Fn>
void dispatch_wire(DType dtype, Fn&& fn) {
  if (is_reduced_float(dtype)) {
    fn(TypeTag<uint16_t>{});
    return;
  }
  dispatch_dtype(dtype, std::forward<Fn>(fn));
}

// In-place gloo allreduce of n elements at ptr.
void gloo_allreduce(const ContextPtr& ctx, void* ptr, size_t n, DType dtype, const ReduceFn& fn,
                    uint32_t tag, milliseconds timeout) {
  dispatch_wire(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    ::gloo::AllreduceOptions opts(ctx);
    opts.setOutput(static_cast<T*>(ptr), n);
    opts.setReduceFunction(fn);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    ::gloo::allreduce(opts);
  });
}

}  // namespace

WorkPtr ProcessGroupGloo::all_reduce(Tensor& tensor, ReduceOp op) {
  checks::check_tensor(kWho, "all_reduce", tensor, "tensor", kPlacement);
  const auto fn = reduce_function(tensor.dtype(), op);
  auto task = new_task(Kind::AllReduce, tensor);
  task->sig.op = static_cast<int64_t>(op);
  add_memory(*task, tensor);
  const int size = size_;
  const Tensor t = tensor;
  task->run = [t, fn, op, size](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0 || size == 1) return;
    const Host h = to_host(t, true);
    gloo_allreduce(ctx, h.ptr(), n, t.dtype(), fn, tag, remaining(deadline));
    if (op == ReduceOp::Avg) divide_in_place(h.ptr(), t.dtype(), n, size);
    h.write_back();
  };
  // Small: every rank folds the gathered values in rank order (the same
  // result, bit for bit, on every rank).
  task->payload_bytes = t.nbytes();
  auto host = std::make_shared<Host>();
  task->put = [t, host](char* payload) {
    *host = to_host(t, true);
    std::memcpy(payload, host->bytes(), t.nbytes());
  };
  task->take = [t, host, fn, op, size](const char* gathered, size_t stride) {
    const size_t n = static_cast<size_t>(t.numel());
    char* out = host->bytes();
    std::memcpy(out, gathered, t.nbytes());
    for (int r = 1; r < size; ++r) fn(out, out, gathered + r * stride, n);
    if (op == ReduceOp::Avg) divide_in_place(out, t.dtype(), n, size);
    host->write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::broadcast(Tensor& tensor, int root) {
  checks::check_tensor(kWho, "broadcast", tensor, "tensor", kPlacement);
  checks::check_root(kWho, "broadcast", root, size_);
  auto task = new_task(Kind::Broadcast, tensor, root);
  add_memory(*task, tensor);
  const bool is_root = rank_ == root;
  const Tensor t = tensor;
  task->run = [t, root, is_root, size = size_](const ContextPtr& ctx, uint32_t tag,
                                               Clock::time_point deadline) {
    if (t.numel() == 0 || size == 1) return;
    const Host h = to_host(t, is_root);
    ::gloo::BroadcastOptions opts(ctx);
    opts.setOutput(h.bytes(), h.host.nbytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::broadcast(opts);
    if (!is_root) h.write_back();
  };
  task->payload_bytes = t.nbytes();
  task->put = [t, is_root](char* payload) {
    if (is_root) std::memcpy(payload, to_host(t, true).bytes(), t.nbytes());
  };
  task->take = [t, is_root, root](const char* gathered, size_t stride) {
    if (is_root) return;
    const Host h = to_host(t, false);
    std::memcpy(h.bytes(), gathered + root * stride, t.nbytes());
    h.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::reduce(Tensor& tensor, int root, ReduceOp op) {
  checks::check_tensor(kWho, "reduce", tensor, "tensor", kPlacement);
  checks::check_root(kWho, "reduce", root, size_);
  const auto fn = reduce_function(tensor.dtype(), op);
  auto task = new_task(Kind::Reduce, tensor, root);
  task->sig.op = static_cast<int64_t>(op);
  add_memory(*task, tensor);
  const bool is_root = rank_ == root;
  const Tensor t = tensor;
  task->run = [t, fn, op, root, is_root, size = size_](const ContextPtr& ctx, uint32_t tag,
                                                       Clock::time_point deadline) {
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0 || size == 1) return;
    const Host h = to_host(t, true);
    // gloo uses the output as its accumulator on every rank: off the root it
    // is scratch, so the caller's tensor stays as it was.
    std::unique_ptr<char[]> scratch;
    if (!is_root) scratch.reset(new char[h.host.nbytes()]);
    dispatch_wire(t.dtype(), [&](auto type) {
      using T = typename decltype(type)::type;
      ::gloo::ReduceOptions opts(ctx);
      if (is_root) {
        opts.setOutput(static_cast<T*>(h.ptr()), n);
      } else {
        opts.setInput(static_cast<T*>(h.ptr()), n);
        opts.setOutput(reinterpret_cast<T*>(scratch.get()), n);
      }
      opts.setRoot(root);
      opts.setReduceFunction(fn);
      opts.setTag(tag);
      opts.setTimeout(remaining(deadline));
      ::gloo::reduce(opts);
    });
    if (is_root) {
      if (op == ReduceOp::Avg) divide_in_place(h.ptr(), t.dtype(), n, size);
      h.write_back();
    }
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  checks::check_all_gather(kWho, outputs, input, size_, kPlacement);
  auto task = new_task(Kind::AllGather, input);
  add_memory(*task, input);
  add_memory(*task, outputs);
  const Tensor in_t = input;
  const std::vector<Tensor> outs_t = outputs;
  task->run = [in_t, outs_t](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t nb = in_t.nbytes();
    if (nb == 0) return;
    const Host in = to_host(in_t, true);
    const auto outs = to_host(outs_t, false);
    std::unique_ptr<char[]> scratch;
    char* out = pack(outs, scratch, false);
    ::gloo::AllgatherOptions opts(ctx);
    opts.setInput(in.bytes(), nb);
    opts.setOutput(out, nb * outs.size());
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::allgather(opts);
    unpack(out, outs);
  };
  task->payload_bytes = in_t.nbytes();
  task->put = [in_t](char* payload) {
    std::memcpy(payload, to_host(in_t, true).bytes(), in_t.nbytes());
  };
  task->take = [in_t, outs_t](const char* gathered, size_t stride) {
    for (size_t r = 0; r < outs_t.size(); ++r) {
      const Host h = to_host(outs_t[r], false);
      std::memcpy(h.bytes(), gathered + r * stride, in_t.nbytes());
      h.write_back();
    }
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  checks::check_tensor(kWho, "all_gather_into_tensor", input, "input", kPlacement);
  checks::check_tensor(kWho, "all_gather_into_tensor", output, "output", kPlacement);
  checks::check_all_gather_into_tensor(kWho, output, input, size_);
  auto task = new_task(Kind::AllGatherIntoTensor, input);
  add_memory(*task, input);
  add_memory(*task, output);
  const Tensor in_t = input;
  const Tensor out_t = output;
  task->run = [in_t, out_t](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t nb = in_t.nbytes();
    if (nb == 0) return;
    const Host in = to_host(in_t, true);
    const Host out = to_host(out_t, false);
    ::gloo::AllgatherOptions opts(ctx);
    opts.setInput(in.bytes(), nb);
    opts.setOutput(out.bytes(), out.host.nbytes());
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::allgather(opts);
    out.write_back();
  };
  task->payload_bytes = in_t.nbytes();
  task->put = [in_t](char* payload) {
    std::memcpy(payload, to_host(in_t, true).bytes(), in_t.nbytes());
  };
  task->take = [in_t, out_t](const char* gathered, size_t stride) {
    const Host out = to_host(out_t, false);
    const size_t nb = in_t.nbytes();
    for (size_t r = 0; r * nb < out.host.nbytes(); ++r)
      std::memcpy(out.bytes() + r * nb, gathered + r * stride, nb);
    out.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  checks::check_gather(kWho, outputs, input, root, rank_, size_, kPlacement);
  const bool is_root = rank_ == root;
  auto task = new_task(Kind::Gather, input, root);
  const Tensor in_t = input;
  const std::vector<Tensor> outs_t = is_root ? outputs : std::vector<Tensor>();
  add_memory(*task, in_t);
  add_memory(*task, outs_t);
  task->run = [in_t, outs_t, root, is_root, size = size_](
                  const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t nb = in_t.nbytes();
    if (nb == 0) return;
    const Host in = to_host(in_t, true);
    const auto outs = to_host(outs_t, false);
    std::unique_ptr<char[]> scratch;
    char* out = is_root ? pack(outs, scratch, false) : nullptr;
    ::gloo::GatherOptions opts(ctx);
    opts.setInput(in.bytes(), nb);
    if (is_root) opts.setOutput(out, nb * size);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::gather(opts);
    if (is_root) unpack(out, outs);
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  checks::check_scatter(kWho, output, inputs, root, rank_, size_, kPlacement);
  const bool is_root = rank_ == root;
  auto task = new_task(Kind::Scatter, output, root);
  const Tensor out_t = output;
  const std::vector<Tensor> ins_t = is_root ? inputs : std::vector<Tensor>();
  add_memory(*task, out_t);
  add_memory(*task, ins_t);
  task->run = [out_t, ins_t, root, is_root](const ContextPtr& ctx, uint32_t tag,
                                            Clock::time_point deadline) {
    const size_t nb = out_t.nbytes();
    if (nb == 0) return;
    const Host out = to_host(out_t, false);
    const auto ins = to_host(ins_t, true);
    ::gloo::ScatterOptions opts(ctx);
    if (is_root) {
      std::vector<char*> ptrs;
      for (const auto& h : ins) ptrs.push_back(h.bytes());
      opts.setInputs(ptrs, nb);
    }
    opts.setOutput(out.bytes(), nb);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::scatter(opts);
    out.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                         ReduceOp op) {
  checks::check_reduce_scatter(kWho, output, inputs, size_, kPlacement);
  const auto fn = reduce_function(output.dtype(), op);
  auto task = new_task(Kind::ReduceScatter, output);
  task->sig.op = static_cast<int64_t>(op);
  add_memory(*task, output);
  add_memory(*task, inputs);
  const Tensor out_t = output;
  const std::vector<Tensor> ins_t = inputs;
  task->run = [out_t, ins_t, fn, op, rank = rank_, size = size_](
                  const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t n = static_cast<size_t>(out_t.numel());
    const size_t nb = out_t.nbytes();
    if (n == 0) return;
    const Host out = to_host(out_t, false);
    const auto ins = to_host(ins_t, true);
    // All-reduce of the inputs concatenated (a copy, so the inputs stay as
    // they were), then this rank's chunk.
    std::unique_ptr<char[]> scratch(new char[nb * size]);
    for (int r = 0; r < size; ++r) std::memcpy(scratch.get() + r * nb, ins[r].ptr(), nb);
    if (size > 1)
      gloo_allreduce(ctx, scratch.get(), n * size, out_t.dtype(), fn, tag, remaining(deadline));
    std::memcpy(out.ptr(), scratch.get() + rank * nb, nb);
    if (op == ReduceOp::Avg) divide_in_place(out.ptr(), out_t.dtype(), n, size);
    out.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::all_to_all(std::vector<Tensor>& outputs,
                                     const std::vector<Tensor>& inputs) {
  checks::check_all_to_all(kWho, outputs, inputs, rank_, size_, kPlacement);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::AllToAll;
  task->sig.dtype = static_cast<int64_t>(inputs[0].dtype());
  for (int r = 0; r < size_; ++r) {
    task->sig.send_counts.push_back(inputs[r].numel());
    task->sig.recv_counts.push_back(outputs[r].numel());
  }
  add_memory(*task, inputs);
  add_memory(*task, outputs);
  const std::vector<Tensor> ins_t = inputs;
  const std::vector<Tensor> outs_t = outputs;
  task->run = [ins_t, outs_t](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const auto ins = to_host(ins_t, true);
    const auto outs = to_host(outs_t, false);
    std::unique_ptr<char[]> in_scratch, out_scratch;
    char* in = pack(ins, in_scratch, true);
    char* out = pack(outs, out_scratch, false);
    std::vector<int64_t> in_bytes, out_bytes;
    for (const auto& h : ins) in_bytes.push_back(static_cast<int64_t>(h.host.nbytes()));
    for (const auto& h : outs) out_bytes.push_back(static_cast<int64_t>(h.host.nbytes()));
    ::gloo::AlltoallvOptions opts(ctx);
    opts.setInput(non_null(in), in_bytes);
    opts.setOutput(non_null(out), out_bytes);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::alltoallv(opts);
    unpack(out, outs);
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::barrier() {
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::Barrier;
  task->after_all = true;
  const bool checked = options_.check_consistency;
  task->run = [checked, size = size_](const ContextPtr& ctx, uint32_t tag,
                                      Clock::time_point deadline) {
    // With the consistency check on, its exchange already was a barrier.
    if (checked || size == 1) return;
    ::gloo::BarrierOptions opts(ctx);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::barrier(opts);
  };
  return enqueue(task);
}

}  // namespace distributed
}  // namespace loom
