#include "distributed/CollectiveChecks.h"

#include <sstream>

namespace loom {
namespace distributed {
namespace checks {

void check_group(const char* who, const std::shared_ptr<Store>& store, int rank, int size,
                 std::chrono::milliseconds timeout) {
  LOOM_CHECK(store != nullptr, who, ": the store is null");
  LOOM_CHECK(size >= 1, who, ": size must be >= 1, got ", size);
  LOOM_CHECK(rank >= 0 && rank < size, who, ": rank must be in [0, ", size, "), got ", rank);
  LOOM_CHECK(timeout.count() > 0, who, ": timeout must be positive, got ", timeout.count(), " ms");
}

std::string sizes_text(const IntList& sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

std::string name_at(const char* list, size_t index) {
  return std::string(list) + "[" + std::to_string(index) + "]";
}

std::string describe_transfer(const char* op, const Tensor& t, const char* direction, int peer,
                              int tag, int rank, int size) {
  return std::string(op) + " of " + std::to_string(t.numel()) + " " + dtype_name(t.dtype()) +
         " " + direction + " rank " + std::to_string(peer) + " with tag " + std::to_string(tag) +
         " on rank " + std::to_string(rank) + " of " + std::to_string(size);
}

void check_tensor(const char* who, const char* op, const Tensor& t, const std::string& name,
                  Placement placement) {
  LOOM_CHECK(t.defined(), who, "::", op, ": ", name, " is an undefined tensor");
  switch (placement) {
    case Placement::kCpuOrCuda:
      LOOM_CHECK(t.is_cpu() || t.is_cuda(), who, "::", op, ": ", name,
                 " must be on a CPU or CUDA device, got ", t.device());
      break;
    case Placement::kCpuOnly:
      LOOM_CHECK(t.is_cpu(), who, "::", op, ": ", name,
                 " must be a CPU tensor (this build has no CUDA), got one on ", t.device());
      break;
    case Placement::kCudaOnly:
      LOOM_CHECK(t.is_cuda(), who, "::", op, ": ", name,
                 " must be a CUDA tensor (the nccl backend runs on GPUs), got one on ", t.device(),
                 "; move it with .to(Device(kCUDA, i)) or use the gloo backend for CPU tensors");
      break;
  }
  LOOM_CHECK(t.is_contiguous(), who, "::", op, ": ", name, " must be contiguous, got ",
             t.describe(), " with strides ", sizes_text(t.strides()),
             "; pass t.contiguous() and copy the result back");
}

void check_root(const char* who, const char* op, int root, int size) {
  LOOM_CHECK(root >= 0 && root < size, who, "::", op, ": root must be in [0, ", size, "), got ",
             root);
}

void check_same(const char* who, const char* op, const Tensor& t, const std::string& name,
                const Tensor& ref, const std::string& ref_name) {
  LOOM_CHECK(t.dtype() == ref.dtype(), who, "::", op, ": ", name, " has dtype ",
             dtype_name(t.dtype()), " but ", ref_name, " has ", dtype_name(ref.dtype()));
  LOOM_CHECK(t.numel() == ref.numel(), who, "::", op, ": ", name, " has ", t.numel(),
             " elements (shape ", sizes_text(t.sizes()), ") but ", ref_name, " has ", ref.numel(),
             " (shape ", sizes_text(ref.sizes()), ")");
}

void check_count(const char* who, const char* op, const char* name, size_t got, int size) {
  LOOM_CHECK(got == static_cast<size_t>(size), who, "::", op, ": expected ", size, " ", name,
             " (one per rank), got ", got);
}

void check_same_device(const char* who, const char* op, const Tensor& t, const std::string& name,
                       const Tensor& ref, const std::string& ref_name) {
  LOOM_CHECK(t.device() == ref.device(), who, "::", op, ": ", name, " is on ", t.device(), " but ",
             ref_name, " is on ", ref.device(),
             "; every tensor of one collective must be on the same device");
}

void check_peer(const char* who, const char* op, const char* name, int peer, int rank, int size,
                int tag) {
  LOOM_CHECK(peer >= 0 && peer < size && peer != rank, who, "::", op, ": ", name,
             " must be another rank in [0, ", size, ") than this rank (", rank, "), got ", peer);
  LOOM_CHECK(tag >= 0, who, "::", op, ": tag must be >= 0, got ", tag);
}

void check_all_gather_into_tensor(const char* who, const Tensor& output, const Tensor& input,
                                  int size) {
  LOOM_CHECK(output.dtype() == input.dtype(), who, "::all_gather_into_tensor: output has dtype ",
             dtype_name(output.dtype()), " but input has ", dtype_name(input.dtype()));
  LOOM_CHECK(output.numel() == input.numel() * size, who,
             "::all_gather_into_tensor: output must hold size() * input.numel() = ", size, " * ",
             input.numel(), " = ", size * input.numel(), " elements, got ", output.numel(),
             " (shape ", sizes_text(output.sizes()), ")");
}

void check_reduce_op(const char* who, ReduceOp op, DType dtype) {
  LOOM_CHECK(op != ReduceOp::Avg || is_floating_point(dtype), who,
             ": reduce op avg needs a floating-point tensor (float32 or float64), got ",
             dtype_name(dtype), "; reduce with sum and divide yourself");
}

}  // namespace checks
}  // namespace distributed
}  // namespace loom
