#include "distributed/GatherScatter.h"

#include <string>

namespace loom {
namespace distributed {
namespace checks {

namespace {

// nccl runs a collective on one device's communicator.
bool needs_one_device(Placement placement) { return placement == Placement::kCudaOnly; }

// A collective between `single` and `list`, one tensor per rank, each like
// single (dtype, element count and, where the backend needs it, device).
// root: null for all_gather and reduce_scatter; gather and scatter pass
// theirs, and then the list matters on the root only.
void check_single_and_list(const char* who, const char* op, const Tensor& single,
                           const char* single_name, const std::vector<Tensor>& list,
                           const char* list_name, const int* root, int rank, int size,
                           Placement placement) {
  check_tensor(who, op, single, single_name, placement);
  std::string count_name = list_name;
  if (root != nullptr) {
    check_root(who, op, *root, size);
    if (rank != *root) return;
    count_name += " on the root";
  }
  check_count(who, op, count_name.c_str(), list.size(), size);
  for (size_t r = 0; r < list.size(); ++r) {
    const std::string name = name_at(list_name, r);
    check_tensor(who, op, list[r], name, placement);
    check_same(who, op, list[r], name, single, single_name);
    if (needs_one_device(placement)) check_same_device(who, op, list[r], name, single, single_name);
  }
}

}  // namespace

void check_gather(const char* who, const std::vector<Tensor>& outputs, const Tensor& input,
                  int root, int rank, int size, Placement placement) {
  check_single_and_list(who, "gather", input, "input", outputs, "outputs", &root, rank, size,
                        placement);
}

void check_scatter(const char* who, const Tensor& output, const std::vector<Tensor>& inputs,
                   int root, int rank, int size, Placement placement) {
  check_single_and_list(who, "scatter", output, "output", inputs, "inputs", &root, rank, size,
                        placement);
}

void check_all_gather(const char* who, const std::vector<Tensor>& outputs, const Tensor& input,
                      int size, Placement placement) {
  check_single_and_list(who, "all_gather", input, "input", outputs, "outputs", nullptr, -1, size,
                        placement);
}

void check_reduce_scatter(const char* who, const Tensor& output,
                          const std::vector<Tensor>& inputs, int size, Placement placement) {
  check_single_and_list(who, "reduce_scatter", output, "output", inputs, "inputs", nullptr, -1,
                        size, placement);
}

void check_all_to_all(const char* who, const std::vector<Tensor>& outputs,
                      const std::vector<Tensor>& inputs, int rank, int size,
                      Placement placement) {
  const char* op = "all_to_all";
  check_count(who, op, "inputs", inputs.size(), size);
  check_count(who, op, "outputs", outputs.size(), size);
  for (int r = 0; r < size; ++r) {
    check_tensor(who, op, inputs[r], name_at("inputs", r), placement);
    check_tensor(who, op, outputs[r], name_at("outputs", r), placement);
    if (needs_one_device(placement)) {
      check_same_device(who, op, inputs[r], name_at("inputs", r), inputs[0], "inputs[0]");
      check_same_device(who, op, outputs[r], name_at("outputs", r), inputs[0], "inputs[0]");
    }
  }
  for (int r = 0; r < size; ++r) {
    LOOM_CHECK(inputs[r].dtype() == inputs[0].dtype() && outputs[r].dtype() == inputs[0].dtype(),
               who, "::all_to_all: every input and output must have the dtype of inputs[0] (",
               dtype_name(inputs[0].dtype()), "); inputs[", r, "] is ",
               dtype_name(inputs[r].dtype()), ", outputs[", r, "] is ",
               dtype_name(outputs[r].dtype()));
  }
  LOOM_CHECK(inputs[rank].numel() == outputs[rank].numel(), who, "::all_to_all: outputs[", rank,
             "] receives this rank's own inputs[", rank,
             "], so they must have as many elements; got ", outputs[rank].numel(), " and ",
             inputs[rank].numel());
}

}  // namespace checks

char* back_to_back(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) return nullptr;
  char* next = nullptr;
  for (const Tensor& t : tensors) {
    if (t.numel() == 0) return nullptr;
    char* start = static_cast<char*>(t.data_ptr());
    if (next != nullptr && start != next) return nullptr;
    next = start + t.nbytes();
  }
  return static_cast<char*>(tensors[0].data_ptr());
}

}  // namespace distributed
}  // namespace loom
