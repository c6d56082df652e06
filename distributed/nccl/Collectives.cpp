// ProcessGroupNccl's collectives: argument checks (shared with gloo:
// distributed/CollectiveChecks.h, GatherScatter.h), then
// one launch each on the NCCL stream (see distributed/nccl/NcclState.h for
// how a launch is ordered and finished).  Empty without CUDA: the stubs in
// ProcessGroupNccl.cpp throw instead.
#ifdef LOOM_WITH_CUDA

#include "autograd/GradMode.h"
#include "distributed/GatherScatter.h"
#include "distributed/nccl/NcclState.h"
#include "tensor/Factory.h"

namespace loom {
namespace distributed {

using namespace nccl_glue;

namespace {

// Device-to-device copy on the NCCL stream (a rank's message to itself).
void copy_on(cudaStream_t stream, const Tensor& dst, const Tensor& src) {
  if (dst.nbytes() == 0) return;
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                  cudaMemcpyDeviceToDevice, stream));
}

std::vector<Tensor> with(std::vector<Tensor> ts, const Tensor& t) {
  ts.push_back(t);
  return ts;
}

}  // namespace

#define LOOM_NCCL(call) s.check_call((call), comm, #call, what, deadline)

WorkPtr ProcessGroupNccl::all_reduce(Tensor& tensor, ReduceOp op) {
  check_cuda_tensor("all_reduce", tensor, "tensor");
  checks::check_reduce_op(kWho, op, tensor.dtype());
  Impl& s = *impl_;
  const std::string what = describe("all_reduce", to_string(op).c_str(), tensor, -1, rank_, size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                            nccl_type(t.dtype()), nccl_op(op, t.dtype()), comm,
                                            stream));
                  });
}

WorkPtr ProcessGroupNccl::broadcast(Tensor& tensor, int root) {
  check_cuda_tensor("broadcast", tensor, "tensor");
  checks::check_root(kWho, "broadcast", root, size_);
  Impl& s = *impl_;
  const std::string what = describe("broadcast", nullptr, tensor, root, rank_, size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(),
                                            nccl_type(t.dtype()), root, comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::reduce(Tensor& tensor, int root, ReduceOp op) {
  check_cuda_tensor("reduce", tensor, "tensor");
  checks::check_root(kWho, "reduce", root, size_);
  checks::check_reduce_op(kWho, op, tensor.dtype());
  Impl& s = *impl_;
  const std::string what = describe("reduce", to_string(op).c_str(), tensor, root, rank_, size_);
  const Tensor t = tensor;
  // recvbuff is only written on the root: other ranks' tensors stay as they were.
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                         nccl_type(t.dtype()), nccl_op(op, t.dtype()), root, comm,
                                         stream));
                  });
}

WorkPtr ProcessGroupNccl::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  checks::check_all_gather(kWho, outputs, input, size_, kPlacement);
  Impl& s = *impl_;
  const std::string what = describe("all_gather", nullptr, input, -1, rank_, size_);
  const Tensor in = input;
  const std::vector<Tensor> outs = outputs;
  return s.launch(
      what, in.device().index, with(outs, in), false,
      [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
        const size_t n = static_cast<size_t>(in.numel());
        if (n == 0) return;
        const ncclDataType_t type = nccl_type(in.dtype());
        if (char* base = back_to_back(outs)) {
          LOOM_NCCL(ncclAllGather(in.data_ptr(), base, n, type, comm, stream));
          return;
        }
        // Scattered outputs: one broadcast per rank, fused into one launch.
        LOOM_NCCL(ncclGroupStart());
        for (int r = 0; r < size_; ++r) {
          const void* send = r == rank_ ? in.data_ptr() : outs[r].data_ptr();
          LOOM_NCCL(ncclBroadcast(send, outs[r].data_ptr(), n, type, r, comm, stream));
        }
        LOOM_NCCL(ncclGroupEnd());
      });
}

WorkPtr ProcessGroupNccl::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  check_cuda_tensor("all_gather_into_tensor", input, "input");
  check_cuda_tensor("all_gather_into_tensor", output, "output");
  checks::check_same_device(kWho, "all_gather_into_tensor", output, "output", input, "input");
  checks::check_all_gather_into_tensor(kWho, output, input, size_);
  Impl& s = *impl_;
  const std::string what = describe("all_gather_into_tensor", nullptr, input, -1, rank_, size_);
  const Tensor in = input, out = output;
  return s.launch(what, in.device().index, {in, out}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (in.numel() == 0) return;
                    LOOM_NCCL(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(),
                                            nccl_type(in.dtype()), comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  checks::check_gather(kWho, outputs, input, root, rank_, size_, kPlacement);
  const bool is_root = rank_ == root;
  std::vector<Tensor> outs;
  if (is_root) outs = outputs;
  Impl& s = *impl_;
  const std::string what = describe("gather", nullptr, input, root, rank_, size_);
  const Tensor in = input;
  return s.launch(what, in.device().index, with(outs, in), false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    const size_t n = static_cast<size_t>(in.numel());
                    if (n == 0) return;
                    const ncclDataType_t type = nccl_type(in.dtype());
                    LOOM_NCCL(ncclGroupStart());
                    if (is_root) {
                      for (int r = 0; r < size_; ++r)
                        if (r != rank_)
                          LOOM_NCCL(ncclRecv(outs[r].data_ptr(), n, type, r, comm, stream));
                    } else {
                      LOOM_NCCL(ncclSend(in.data_ptr(), n, type, root, comm, stream));
                    }
                    LOOM_NCCL(ncclGroupEnd());
                    if (is_root) copy_on(stream, outs[rank_], in);
                  });
}

WorkPtr ProcessGroupNccl::scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  checks::check_scatter(kWho, output, inputs, root, rank_, size_, kPlacement);
  const bool is_root = rank_ == root;
  std::vector<Tensor> ins;
  if (is_root) ins = inputs;
  Impl& s = *impl_;
  const std::string what = describe("scatter", nullptr, output, root, rank_, size_);
  const Tensor out = output;
  return s.launch(what, out.device().index, with(ins, out), false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    const size_t n = static_cast<size_t>(out.numel());
                    if (n == 0) return;
                    const ncclDataType_t type = nccl_type(out.dtype());
                    LOOM_NCCL(ncclGroupStart());
                    if (is_root) {
                      for (int r = 0; r < size_; ++r)
                        if (r != rank_)
                          LOOM_NCCL(ncclSend(ins[r].data_ptr(), n, type, r, comm, stream));
                    } else {
                      LOOM_NCCL(ncclRecv(out.data_ptr(), n, type, root, comm, stream));
                    }
                    LOOM_NCCL(ncclGroupEnd());
                    if (is_root) copy_on(stream, out, ins[rank_]);
                  });
}

WorkPtr ProcessGroupNccl::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                         ReduceOp op) {
  checks::check_reduce_scatter(kWho, output, inputs, size_, kPlacement);
  checks::check_reduce_op(kWho, op, output.dtype());
  Impl& s = *impl_;
  const std::string what =
      describe("reduce_scatter", to_string(op).c_str(), output, -1, rank_, size_);
  const Tensor out = output;
  // NCCL reduces one buffer of size * n elements: the inputs when they lie
  // back to back, else a copy made on the caller's stream (before the
  // collective's start event, so it is ordered).
  Tensor flat;
  if (out.numel() > 0 && back_to_back(inputs) == nullptr) {
    autograd::NoGradGuard no_grad;
    flat = empty({static_cast<int64_t>(size_) * out.numel()},
                 TensorOptions(out.dtype()).device(out.device()));
    for (int r = 0; r < size_; ++r)
      flat.narrow(0, r * out.numel(), out.numel()).copy_(inputs[r].reshape({-1}));
  }
  std::vector<Tensor> touched = with(inputs, out);
  if (flat.defined()) touched.push_back(flat);
  const void* send = flat.defined() ? flat.data_ptr() : (out.numel() ? inputs[0].data_ptr() : nullptr);
  return s.launch(what, out.device().index, touched, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (out.numel() == 0) return;
                    LOOM_NCCL(ncclReduceScatter(send, out.data_ptr(), out.numel(),
                                                nccl_type(out.dtype()),
                                                nccl_op(op, out.dtype()), comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::all_to_all(std::vector<Tensor>& outputs,
                                     const std::vector<Tensor>& inputs) {
  checks::check_all_to_all(kWho, outputs, inputs, rank_, size_, kPlacement);
  Impl& s = *impl_;
  int64_t total = 0;
  for (const Tensor& t : inputs) total += t.numel();
  const std::string what = "all_to_all of " + std::to_string(total) + " " +
                           dtype_name(inputs[0].dtype()) + " sent on rank " +
                           std::to_string(rank_) + " of " + std::to_string(size_);
  const std::vector<Tensor> ins = inputs, outs = outputs;
  std::vector<Tensor> touched = ins;
  touched.insert(touched.end(), outs.begin(), outs.end());
  return s.launch(what, ins[0].device().index, touched, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    const ncclDataType_t type = nccl_type(ins[0].dtype());
                    LOOM_NCCL(ncclGroupStart());
                    for (int r = 0; r < size_; ++r) {
                      if (r == rank_) continue;
                      if (ins[r].numel() > 0)
                        LOOM_NCCL(ncclSend(ins[r].data_ptr(), ins[r].numel(), type, r, comm,
                                           stream));
                      if (outs[r].numel() > 0)
                        LOOM_NCCL(ncclRecv(outs[r].data_ptr(), outs[r].numel(), type, r, comm,
                                           stream));
                    }
                    LOOM_NCCL(ncclGroupEnd());
                    copy_on(stream, outs[rank_], ins[rank_]);
                  });
}

WorkPtr ProcessGroupNccl::barrier() {
  Impl& s = *impl_;
  int device = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    device = s.current_device();
  }
  // An all-reduce of one byte; on the NCCL stream it runs after every
  // earlier collective of this device, and wait() blocks the host.
  const Tensor t = zeros({1}, TensorOptions(kUInt8).device(Device(kCUDA, device)));
  const std::string what = "barrier on rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  return s.launch(what, device, {t}, true,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    LOOM_NCCL(ncclAllReduce(t.data_ptr(), t.data_ptr(), 1, ncclUint8, ncclMax,
                                            comm, stream));
                  });
}

WorkPtr ProcessGroupNccl::send(const Tensor& tensor, int dst, int tag) {
  check_cuda_tensor("send", tensor, "tensor");
  checks::check_peer(kWho, "send", "dst", dst, rank_, size_, tag);
  Impl& s = *impl_;
  const std::string what =
      checks::describe_transfer("send", tensor, "to", dst, tag, rank_, size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclSend(t.data_ptr(), t.numel(), nccl_type(t.dtype()), dst, comm,
                                       stream));
                  });
}

WorkPtr ProcessGroupNccl::recv(Tensor& tensor, int src, int tag) {
  check_cuda_tensor("recv", tensor, "tensor");
  checks::check_peer(kWho, "recv", "src", src, rank_, size_, tag);
  Impl& s = *impl_;
  const std::string what =
      checks::describe_transfer("recv", tensor, "from", src, tag, rank_, size_);
  const Tensor t = tensor;
  return s.launch(what, t.device().index, {t}, false,
                  [&](ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline) {
                    if (t.numel() == 0) return;
                    LOOM_NCCL(ncclRecv(t.data_ptr(), t.numel(), nccl_type(t.dtype()), src, comm,
                                       stream));
                  });
}

#undef LOOM_NCCL

}  // namespace distributed
}  // namespace loom

#endif  // LOOM_WITH_CUDA
