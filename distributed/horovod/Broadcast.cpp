#include "distributed/horovod/Broadcast.h"

#include <sstream>

#include "autograd/GradMode.h"
#include "distributed/horovod/Basics.h"
#include "distributed/horovod/Ops.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

// Waits for every handle; rethrows the first error after all have finished.
void synchronize_all(const std::vector<Handle>& handles) {
  std::exception_ptr error;
  for (const Handle& h : handles) {
    try {
      synchronize(h);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

struct Layout {
  std::string key;
  DType dtype;
  IntList sizes;
};

// "key dtype ndim size..." per line.
std::string encode_layout(const nn::OrderedDict<Tensor>& state) {
  std::ostringstream out;
  for (const auto& [key, t] : state.items()) {
    LOOM_CHECK(key.find_first_of(" \t\n") == std::string::npos,
               "hvd::broadcast_optimizer_state: state key \"", key, "\" contains white space");
    out << key << ' ' << static_cast<int>(t.dtype()) << ' ' << t.dim();
    for (int64_t s : t.sizes()) out << ' ' << s;
    out << '\n';
  }
  return out.str();
}

std::vector<Layout> decode_layout(const std::string& text) {
  std::vector<Layout> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Layout l;
    int dtype = 0;
    int64_t dim = 0;
    fields >> l.key >> dtype >> dim;
    LOOM_CHECK(!fields.fail() && dim >= 0, "hvd::broadcast_optimizer_state: malformed state layout line '",
               line, "' from the root");
    l.dtype = static_cast<DType>(dtype);
    l.sizes.resize(dim);
    for (int64_t d = 0; d < dim; ++d) fields >> l.sizes[d];
    LOOM_CHECK(!fields.fail(), "hvd::broadcast_optimizer_state: malformed state layout line '", line,
               "' from the root");
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace

void broadcast_parameters(const nn::OrderedDict<Tensor>& params, int root_rank) {
  const char* who = "hvd::broadcast_parameters";
  LOOM_CHECK(is_initialized(), who, ": hvd is not initialised; call hvd::init() first");
  LOOM_CHECK(root_rank >= 0 && root_rank < size(), who, ": root_rank must be in [0, size() = ", size(),
             "), got ", root_rank);
  autograd::NoGradGuard no_grad;
  std::vector<Handle> handles;
  for (const auto& [name, t] : params.items()) {
    LOOM_CHECK(t.defined(), who, ": \"", name, "\" is an undefined tensor");
    Tensor target = t;
    handles.push_back(broadcast_async_(target, root_rank, "broadcast_parameters." + name));
  }
  synchronize_all(handles);
}

void broadcast_optimizer_state(optim::Optimizer& optimizer, int root_rank) {
  const char* who = "hvd::broadcast_optimizer_state";
  LOOM_CHECK(is_initialized(), who, ": hvd is not initialised; call hvd::init() first");
  LOOM_CHECK(root_rank >= 0 && root_rank < size(), who, ": root_rank must be in [0, size() = ", size(),
             "), got ", root_rank);
  autograd::NoGradGuard no_grad;
  const bool is_root = rank() == root_rank;
  const nn::OrderedDict<Tensor> mine = optimizer.state_dict();

  // Root's layout: its length, then its bytes.
  const std::string text = is_root ? encode_layout(mine) : std::string();
  Tensor length = full({1}, static_cast<int64_t>(text.size()), TensorOptions(kInt64));
  broadcast_(length, root_rank, "broadcast_optimizer_state.layout_bytes");
  const int64_t n = length.item<int64_t>();
  Tensor bytes = is_root ? tensor(std::vector<uint8_t>(text.begin(), text.end()), {n}, TensorOptions(kUInt8))
                         : empty({n}, TensorOptions(kUInt8));
  if (n > 0) broadcast_(bytes, root_rank, "broadcast_optimizer_state.layout");
  const std::vector<uint8_t> raw = bytes.to_vector<uint8_t>();
  const std::vector<Layout> layout = decode_layout(std::string(raw.begin(), raw.end()));

  // The values, on the CPU (state may sit on other devices on other ranks).
  nn::OrderedDict<Tensor> values;
  std::vector<Handle> handles;
  for (const Layout& l : layout) {
    const Tensor* own = mine.find(l.key);
    Tensor t = own && own->dtype() == l.dtype && own->sizes() == l.sizes
                   ? own->to(Device(kCPU)).contiguous().clone()
                   : zeros(l.sizes, TensorOptions(l.dtype));
    values.insert(l.key, t);
    handles.push_back(broadcast_async_(values.at(l.key), root_rank, "broadcast_optimizer_state." + l.key));
  }
  synchronize_all(handles);
  if (!is_root) optimizer.load_state_dict(values);
}

void broadcast_optimizer_state(DistributedOptimizer& optimizer, int root_rank) {
  broadcast_optimizer_state(optimizer.optimizer(), root_rank);
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
