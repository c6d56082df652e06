#include "distributed/horovod/Execute.h"

#include <algorithm>
#include <limits>

#include "tensor/Error.h"
#include "tensor/Factory.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

using detail::HandleState;

// dst (1-D, contiguous) <- src's elements in row-major order, moved to
// dst's device first (CPU logical devices do not mix in one op).
void copy_flat(Tensor dst, const Tensor& src) {
  Tensor flat = src.reshape({src.numel()});
  if (flat.device() != dst.device()) flat = flat.to(dst.device());
  dst.copy_(flat);
}

// out <- values (a view of a fused buffer), reshaped and moved to out's device.
void copy_out(Tensor& out, const Tensor& values) {
  Tensor v = values.view(out.sizes());
  if (v.device() != out.device()) v = v.to(out.device());
  out.copy_(v);
}

// What a joined rank contributes to a reduction: the op's identity.
Tensor neutral(int64_t n, DType dtype, Device device, ReduceOp op) {
  if (op == ReduceOp::Sum || op == ReduceOp::Avg) return zeros({n}, TensorOptions(dtype).device(device));
  Tensor t = empty({n}, TensorOptions(dtype));
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value;
    if (op == ReduceOp::Product) value = T(1);
    else if (op == ReduceOp::Min) value = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                                              : std::numeric_limits<T>::max();
    else value = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
    std::fill(t.data_ptr<T>(), t.data_ptr<T>() + n, value);
  });
  return device == Device(kCPU) ? t : t.to(device);
}

// The device the group's payload buffer lives on.
Device payload_device(const ExecContext& ctx, const Descriptor& d, const std::vector<Request*>& requests) {
  const ProcessGroupPtr& pg = ctx.group_for(d.device_type);
  for (const Request* r : requests)
    if (r) return pg->device_for(r->input.device());
  return pg->device_for(Device(kCPU));
}

// Output sizes of a gather-like op: (rows, input.sizes()[1:]).
IntList rows_like(const Tensor& input, int64_t rows) {
  IntList sizes = input.sizes();
  sizes[0] = rows;
  return sizes;
}

void run_allreduce(const ExecContext& ctx, const std::vector<Descriptor>& descs,
                   const std::vector<Request*>& requests) {
  const Descriptor& d0 = descs[0];
  const ReduceOp op = static_cast<ReduceOp>(d0.arg);
  const ProcessGroupPtr& pg = ctx.group_for(d0.device_type);
  const Device device = payload_device(ctx, d0, requests);
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const Descriptor& d : descs) {
    offsets.push_back(total);
    total += d.count;
  }
  Tensor flat = neutral(total, d0.dtype, device, op);  // (total,)
  std::vector<char> packed(descs.size(), 0);
  for (size_t i = 0; i < descs.size(); ++i) {
    Request* r = requests[i];
    if (!r) continue;
    try {
      Tensor slot = flat.narrow(0, offsets[i], descs[i].count);
      copy_flat(slot, r->input);
      if (r->prescale != 1.0) slot.mul_(r->prescale);
      packed[i] = 1;
    } catch (...) {
      // This rank sends the identity for it; the other ranks' sum stays theirs.
      flat.narrow(0, offsets[i], descs[i].count).copy_(neutral(descs[i].count, d0.dtype, device, op));
      r->state->fail(std::current_exception());
    }
  }
  WorkPtr work = pg->all_reduce(flat, op == ReduceOp::Avg ? ReduceOp::Sum : op);
  const double divisor = op == ReduceOp::Avg ? static_cast<double>(ctx.size) : 1.0;
  for (size_t i = 0; i < descs.size(); ++i) {
    Request* r = requests[i];
    if (!r || !packed[i]) continue;
    const int64_t offset = offsets[i], count = descs[i].count;
    const double scale = r->postscale / divisor;
    Tensor out = r->output;
    auto after = r->after;
    r->state->issue({work}, [flat, offset, count, scale, out, after](HandleState&) mutable {
      Tensor values = flat.narrow(0, offset, count);
      if (scale != 1.0) values = values.mul(scale);
      copy_out(out, values);
      return after ? after(out) : out;
    });
  }
}

void run_broadcast(const ExecContext& ctx, const std::vector<Descriptor>& descs,
                   const std::vector<Request*>& requests) {
  const Descriptor& d0 = descs[0];
  const int root = static_cast<int>(d0.arg);
  const ProcessGroupPtr& pg = ctx.group_for(d0.device_type);
  const Device device = payload_device(ctx, d0, requests);
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const Descriptor& d : descs) {
    offsets.push_back(total);
    total += d.count;
  }
  Tensor flat = zeros({total}, TensorOptions(d0.dtype).device(device));  // (total,)
  std::vector<char> packed(descs.size(), 0);
  for (size_t i = 0; i < descs.size(); ++i) {
    Request* r = requests[i];
    if (!r) continue;
    try {
      if (ctx.rank == root) copy_flat(flat.narrow(0, offsets[i], descs[i].count), r->input);
      packed[i] = 1;
    } catch (...) {
      r->state->fail(std::current_exception());
    }
  }
  WorkPtr work = pg->broadcast(flat, root);
  for (size_t i = 0; i < descs.size(); ++i) {
    Request* r = requests[i];
    if (!r || !packed[i]) continue;
    const int64_t offset = offsets[i], count = descs[i].count;
    Tensor out = r->output;
    r->state->issue({work}, [flat, offset, count, out](HandleState&) mutable {
      copy_out(out, flat.narrow(0, offset, count));
      return out;
    });
  }
}

void run_allgather(const ExecContext& ctx, const Descriptor& d, Request* r) {
  const int size = ctx.size;
  const int64_t my_rows = r ? r->input.size(0) : 0;
  Tensor mine = full({1}, my_rows, TensorOptions(kInt64));
  Tensor all = empty({size}, TensorOptions(kInt64));
  ctx.cpu_group->all_gather_into_tensor(all, mine)->wait();
  const std::vector<int64_t> rows = all.to_vector<int64_t>();
  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  int64_t total_rows = 0;
  for (int64_t n : rows) total_rows += n;
  const int64_t row = d.count;
  if (max_rows * row == 0) {  // nothing to move
    if (r) {
      Tensor out = zeros(rows_like(r->input, total_rows), TensorOptions(d.dtype).device(r->input.device()));
      r->state->issue({}, [out](HandleState&) { return out; });
    }
    return;
  }
  const ProcessGroupPtr& pg = ctx.group_for(d.device_type);
  const Device device = payload_device(ctx, d, {r});
  Tensor padded = zeros({max_rows * row}, TensorOptions(d.dtype).device(device));  // (max_rows * row,)
  bool packed = r != nullptr;
  if (r && my_rows > 0) {
    try {
      copy_flat(padded.narrow(0, 0, my_rows * row), r->input);
    } catch (...) {
      padded.zero_();
      r->state->fail(std::current_exception());
      packed = false;
    }
  }
  Tensor gathered = empty({size * max_rows * row}, TensorOptions(d.dtype).device(device));  // (size, max_rows * row)
  WorkPtr work = pg->all_gather_into_tensor(gathered, padded);
  if (!packed) return;
  const IntList out_sizes = rows_like(r->input, total_rows);
  const Device out_device = r->input.device();
  r->state->issue({work}, [gathered, rows, max_rows, total_rows, row, out_sizes, out_device,
                           size](HandleState&) {
    Tensor out = empty({total_rows * row}, TensorOptions(gathered.dtype()).device(gathered.device()));
    int64_t at = 0;
    for (int k = 0; k < size; ++k) {
      if (rows[k] == 0) continue;
      out.narrow(0, at, rows[k] * row).copy_(gathered.narrow(0, k * max_rows * row, rows[k] * row));
      at += rows[k] * row;
    }
    Tensor shaped = out.view(out_sizes);
    return shaped.device() == out_device ? shaped : shaped.to(out_device);
  });
}

void run_alltoall(const ExecContext& ctx, const Descriptor& d, Request* r) {
  const int size = ctx.size, me = ctx.rank;
  std::vector<int64_t> my_splits = r ? r->splits : std::vector<int64_t>(size, 0);
  Tensor mine = tensor(my_splits, {static_cast<int64_t>(size)}, TensorOptions(kInt64));
  Tensor all = empty({int64_t(size) * size}, TensorOptions(kInt64));
  ctx.cpu_group->all_gather_into_tensor(all, mine)->wait();
  const std::vector<int64_t> matrix = all.to_vector<int64_t>();  // [from * size + to]: rows
  const int64_t row = d.count;
  const ProcessGroupPtr& pg = ctx.group_for(d.device_type);
  const Device device = payload_device(ctx, d, {r});
  const TensorOptions options = TensorOptions(d.dtype).device(device);

  std::vector<Tensor> inputs, outputs;
  bool packed = r != nullptr;
  int64_t offset = 0;
  for (int to = 0; to < size; ++to) {
    const int64_t rows = matrix[me * size + to];
    Tensor piece = empty({rows * row}, options);
    if (r && rows * row > 0) {
      try {
        copy_flat(piece, r->input.narrow(0, offset, rows));
      } catch (...) {
        if (packed) r->state->fail(std::current_exception());
        packed = false;
        piece.zero_();
      }
    }
    offset += rows;
    inputs.push_back(piece);
  }
  std::vector<int64_t> received;
  for (int from = 0; from < size; ++from) {
    received.push_back(matrix[from * size + me]);
    outputs.push_back(empty({received.back() * row}, options));
  }
  WorkPtr work = pg->all_to_all(outputs, inputs);
  if (!packed) return;
  int64_t total_rows = 0;
  for (int64_t n : received) total_rows += n;
  const IntList out_sizes = rows_like(r->input, total_rows);
  const Device out_device = r->input.device();
  r->state->issue({work}, [outputs, received, total_rows, row, out_sizes, out_device, options](HandleState& s) {
    Tensor out = empty({total_rows * row}, options);
    int64_t at = 0;
    for (const Tensor& piece : outputs) {
      if (piece.numel() == 0) continue;
      out.narrow(0, at, piece.numel()).copy_(piece);
      at += piece.numel();
    }
    s.received_splits = received;
    Tensor shaped = out.view(out_sizes);
    return shaped.device() == out_device ? shaped : shaped.to(out_device);
  });
}

}  // namespace

void execute_group(const ExecContext& ctx, const std::vector<Descriptor>& descs,
                   const std::vector<Request*>& requests) {
  LOOM_CHECK(!descs.empty() && descs.size() == requests.size(), "hvd: execute_group got ", descs.size(),
             " descriptors and ", requests.size(), " requests");
  switch (descs[0].kind) {
    case OpKind::kAllreduce: return run_allreduce(ctx, descs, requests);
    case OpKind::kBroadcast: return run_broadcast(ctx, descs, requests);
    case OpKind::kAllgather: return run_allgather(ctx, descs[0], requests[0]);
    case OpKind::kAlltoall: return run_alltoall(ctx, descs[0], requests[0]);
  }
  LOOM_FAIL("hvd: unknown operation kind ", static_cast<int64_t>(descs[0].kind));
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
