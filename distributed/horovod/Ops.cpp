#include "distributed/horovod/Ops.h"

#include <cmath>

#include "distributed/horovod/Global.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

std::shared_ptr<detail::HandleState> new_state(const std::string& name, OpKind kind) {
  return std::make_shared<detail::HandleState>(name, kind);
}

std::string name_or_auto(Controller& c, const std::string& name, OpKind kind) {
  return name.empty() ? c.auto_name(kind) : name;
}

void check_defined(const char* who, const Tensor& t) {
  LOOM_CHECK(t.defined(), who, ": the tensor is undefined");
  LOOM_CHECK(t.is_cpu() || t.is_cuda(), who, ": tensors must be on the CPU or a CUDA device, got ",
             t.device());
}

// Row shape and elements per row of a gather-like op's input.
void describe_rows(const char* who, const Tensor& t, Descriptor& d) {
  LOOM_CHECK(t.dim() >= 1, who, ": needs a tensor with at least one dimension (rows are exchanged "
             "along dim 0), got a 0-dim tensor");
  const IntList rest(t.sizes().begin() + 1, t.sizes().end());
  int64_t row = 1;
  for (int64_t s : rest) row *= s;
  d.count = row;
  d.shape_hash = hash_sizes(rest);
}

// Queues an all-reduce of `tensor`, written into `target` when defined (in
// place), else into a new tensor.
Handle submit_allreduce(const char* who, const Tensor& tensor, const Tensor& target, const std::string& name,
                        ReduceOp op, const CompressorPtr& compression, double prescale, double postscale) {
  check_defined(who, tensor);
  LOOM_CHECK(compression != nullptr, who, ": compression is null; use hvd::Compression::none");
  LOOM_CHECK(op != ReduceOp::Avg || tensor.is_floating_point(), who, ": op Average needs a floating-point "
             "tensor, got ", dtype_name(tensor.dtype()), "; use hvd::Sum and divide as you need");
  LOOM_CHECK(std::isfinite(prescale) && std::isfinite(postscale), who,
             ": prescale and postscale factors must be finite, got ", prescale, " and ", postscale);
  LOOM_CHECK((prescale == 1.0 && postscale == 1.0) || tensor.is_floating_point(), who,
             ": prescale/postscale factors other than 1 need a floating-point tensor, got ",
             dtype_name(tensor.dtype()));
  Controller& c = detail::controller(who);
  auto r = std::make_unique<Request>();
  r->name = name_or_auto(c, name, OpKind::kAllreduce);
  Tensor wire = compression->compress(tensor);
  LOOM_CHECK(wire.defined() && wire.numel() == tensor.numel(), who, ": compressor '", compression->name(),
             "' returned ", wire.defined() ? wire.describe() : std::string("an undefined tensor"), " for ",
             tensor.describe());
  LOOM_CHECK(op != ReduceOp::Avg || wire.is_floating_point(), who, ": compressor '", compression->name(),
             "' sends ", dtype_name(wire.dtype()), ", which op Average cannot reduce");
  r->input = wire;
  r->op = op;
  r->prescale = prescale;
  r->postscale = postscale;
  const bool in_place_wire = wire.is_same(tensor);
  if (in_place_wire && target.defined()) {
    r->output = target;
  } else if (in_place_wire) {
    r->output = empty(tensor.sizes(), TensorOptions(tensor.dtype()).device(tensor.device()));
  } else {
    // Reduce into a wire-shaped buffer of our own, then decompress.
    r->output = empty(wire.sizes(), TensorOptions(wire.dtype()).device(wire.device()));
    const DType original = tensor.dtype();
    const CompressorPtr comp = compression;
    const Tensor dst = target;
    r->after = [comp, original, dst](const Tensor& reduced) {
      Tensor back = comp->decompress(reduced, original);
      if (!dst.defined()) return back;
      Tensor d = dst;
      d.copy_(back.view(d.sizes()).to(d.device()));
      return d;
    };
  }
  r->desc.kind = OpKind::kAllreduce;
  r->desc.dtype = wire.dtype();
  r->desc.count = wire.numel();
  r->desc.arg = static_cast<int64_t>(op);
  r->desc.device_type = wire.device().type;
  r->desc.shape_hash = hash_sizes(tensor.sizes());
  r->state = new_state(r->name, OpKind::kAllreduce);
  return c.submit(std::move(r));
}

Handle submit_broadcast(const char* who, const Tensor& tensor, const Tensor& target, int root,
                        const std::string& name) {
  check_defined(who, tensor);
  Controller& c = detail::controller(who);
  LOOM_CHECK(root >= 0 && root < c.size(), who, ": root_rank must be in [0, size() = ", c.size(), "), got ",
             root);
  auto r = std::make_unique<Request>();
  r->name = name_or_auto(c, name, OpKind::kBroadcast);
  r->input = tensor;
  r->output = target.defined() ? target
                               : empty(tensor.sizes(), TensorOptions(tensor.dtype()).device(tensor.device()));
  r->root = root;
  r->desc.kind = OpKind::kBroadcast;
  r->desc.dtype = tensor.dtype();
  r->desc.count = tensor.numel();
  r->desc.arg = root;
  r->desc.device_type = tensor.device().type;
  r->desc.shape_hash = hash_sizes(tensor.sizes());
  r->state = new_state(r->name, OpKind::kBroadcast);
  return c.submit(std::move(r));
}

}  // namespace

Handle allreduce_async(const Tensor& tensor, const std::string& name, ReduceOp op,
                       const CompressorPtr& compression, double prescale_factor, double postscale_factor) {
  return submit_allreduce("hvd::allreduce_async", tensor, Tensor(), name, op, compression, prescale_factor,
                          postscale_factor);
}

Handle allreduce_async_(Tensor& tensor, const std::string& name, ReduceOp op, const CompressorPtr& compression,
                        double prescale_factor, double postscale_factor) {
  return submit_allreduce("hvd::allreduce_async_", tensor, tensor, name, op, compression, prescale_factor,
                          postscale_factor);
}

Tensor allreduce(const Tensor& tensor, const std::string& name, ReduceOp op, const CompressorPtr& compression,
                 double prescale_factor, double postscale_factor) {
  return synchronize(submit_allreduce("hvd::allreduce", tensor, Tensor(), name, op, compression,
                                      prescale_factor, postscale_factor));
}

Tensor& allreduce_(Tensor& tensor, const std::string& name, ReduceOp op, const CompressorPtr& compression,
                   double prescale_factor, double postscale_factor) {
  synchronize(submit_allreduce("hvd::allreduce_", tensor, tensor, name, op, compression, prescale_factor,
                               postscale_factor));
  return tensor;
}

Handle allgather_async(const Tensor& tensor, const std::string& name) {
  const char* who = "hvd::allgather";
  check_defined(who, tensor);
  Descriptor d;
  describe_rows(who, tensor, d);
  Controller& c = detail::controller(who);
  auto r = std::make_unique<Request>();
  r->name = name_or_auto(c, name, OpKind::kAllgather);
  r->input = tensor;
  d.kind = OpKind::kAllgather;
  d.dtype = tensor.dtype();
  d.device_type = tensor.device().type;
  r->desc = d;
  r->state = new_state(r->name, OpKind::kAllgather);
  return c.submit(std::move(r));
}

Tensor allgather(const Tensor& tensor, const std::string& name) {
  return synchronize(allgather_async(tensor, name));
}

Handle broadcast_async(const Tensor& tensor, int root_rank, const std::string& name) {
  return submit_broadcast("hvd::broadcast_async", tensor, Tensor(), root_rank, name);
}

Handle broadcast_async_(Tensor& tensor, int root_rank, const std::string& name) {
  return submit_broadcast("hvd::broadcast_async_", tensor, tensor, root_rank, name);
}

Tensor broadcast(const Tensor& tensor, int root_rank, const std::string& name) {
  return synchronize(submit_broadcast("hvd::broadcast", tensor, Tensor(), root_rank, name));
}

Tensor& broadcast_(Tensor& tensor, int root_rank, const std::string& name) {
  synchronize(submit_broadcast("hvd::broadcast_", tensor, tensor, root_rank, name));
  return tensor;
}

Handle alltoall_async(const Tensor& tensor, const std::vector<int64_t>& splits, const std::string& name) {
  const char* who = "hvd::alltoall";
  check_defined(who, tensor);
  Descriptor d;
  describe_rows(who, tensor, d);
  Controller& c = detail::controller(who);
  const int size = c.size();
  const int64_t rows = tensor.size(0);
  std::vector<int64_t> s = splits;
  if (s.empty()) {
    LOOM_CHECK(rows % size == 0, who, ": dim 0 of the tensor (", rows, ") is not divisible by size() = ", size,
               "; pass splits saying how many rows go to each rank");
    s.assign(size, rows / size);
  }
  LOOM_CHECK(static_cast<int>(s.size()) == size, who, ": splits must have size() = ", size,
             " entries (rows for each rank), got ", s.size());
  int64_t total = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    LOOM_CHECK(s[k] >= 0, who, ": splits[", k, "] must be >= 0, got ", s[k]);
    total += s[k];
  }
  LOOM_CHECK(total == rows, who, ": splits sum to ", total, " rows but dim 0 of the tensor is ", rows,
             " (shape ", shape_str(tensor.sizes()), ")");
  auto r = std::make_unique<Request>();
  r->name = name_or_auto(c, name, OpKind::kAlltoall);
  r->input = tensor;
  r->splits = s;
  d.kind = OpKind::kAlltoall;
  d.dtype = tensor.dtype();
  d.device_type = tensor.device().type;
  r->desc = d;
  r->state = new_state(r->name, OpKind::kAlltoall);
  return c.submit(std::move(r));
}

AlltoallResult alltoall(const Tensor& tensor, const std::vector<int64_t>& splits, const std::string& name) {
  Handle h = alltoall_async(tensor, splits, name);
  AlltoallResult result;
  result.output = synchronize(h);
  result.received_splits = received_splits(h);
  return result;
}

int join() { return detail::controller("hvd::join").join(); }

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
