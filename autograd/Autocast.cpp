#include "autograd/Autocast.h"

#include <cstring>
#include <unordered_map>

#include "tensor/Stream.h"

namespace loom {
namespace amp {
namespace {

struct DeviceState {
  bool enabled = false;
  DType dtype;
};

struct State {
  DeviceState cpu{false, kBFloat16};
  DeviceState cuda{false, kFloat16};
  int depth = 0;           // open regions (enabled ones), for the cache's lifetime
  bool suspended = false;  // inside an op that has cast already
};

thread_local State t_state;
// Weight casts of this thread's regions: leaf impl -> its cast.
thread_local std::unordered_map<const TensorImpl*, Tensor> t_cache;

DeviceState& state_of(DeviceType type) {
  return type == DeviceType::kCUDA ? t_state.cuda : t_state.cpu;
}

// The op lists.  CPU: PyTorch 1.13's bfloat16 autocast; CUDA: PyTorch's
// float16/bfloat16 autocast.  Names are loom's op names.
const char* const kLowerBoth[] = {"conv2d", "linear", "mm", "bmm", "matmul"};
const char* const kFloat32Cpu[] = {"mse_loss", "nll_loss", "cross_entropy"};
const char* const kFloat32Cuda[] = {
    "mse_loss", "nll_loss", "cross_entropy", "softmax", "log_softmax", "layer_norm",
    "group_norm", "sum", "pow", "exp", "log", "log1p", "expm1", "rsqrt", "softplus"};
const char* const kPromoteBoth[] = {"cat", "stack"};

template <size_t N>
bool listed(const char* const (&list)[N], const char* op) {
  for (const char* name : list)
    if (std::strcmp(name, op) == 0) return true;
  return false;
}

// Autocast touches floating tensors other than float64 (as PyTorch).
bool eligible(const Tensor& t) {
  return t.defined() && t.is_floating_point() && t.dtype() != kFloat64;
}

Tensor cast_to(const Tensor& t, DType dtype, DType lower) {
  if (!eligible(t) || t.dtype() == dtype) return t;
  // A float32 weight cast to the region's dtype is reused for the region.
  // Only a thread with a region of its own open (depth > 0) caches: the
  // cache is cleared when that thread's outermost region closes, and a
  // stream worker that only inherits the region (register_stream_state)
  // never gets there, so its casts would outlive the region and hand
  // pre-step weights to every later iteration.
  const bool cacheable = dtype == lower && t.dtype() == kFloat32 && t.requires_grad() &&
                         t.is_leaf() && t_state.depth > 0;
  if (cacheable) {
    auto it = t_cache.find(t.impl());
    if (it != t_cache.end()) return it->second;
  }
  Tensor out = t.to(dtype);
  if (cacheable) t_cache.emplace(t.impl(), out);
  return out;
}

// Carries the state into stream closures: bit 0 CPU on, bit 1 CUDA on,
// bits 8.. and 16.. their dtypes.
const bool g_registered = [] {
  register_stream_state(
      {[] {
         return static_cast<int64_t>(t_state.cpu.enabled) |
                (static_cast<int64_t>(t_state.cuda.enabled) << 1) |
                (static_cast<int64_t>(t_state.cpu.dtype) << 8) |
                (static_cast<int64_t>(t_state.cuda.dtype) << 16);
       },
       [](int64_t v) {
         t_state.cpu.enabled = (v & 1) != 0;
         t_state.cuda.enabled = (v & 2) != 0;
         t_state.cpu.dtype = static_cast<DType>((v >> 8) & 0xFF);
         t_state.cuda.dtype = static_cast<DType>((v >> 16) & 0xFF);
       }});
  return true;
}();

}  // namespace

bool is_autocast_enabled(DeviceType type) { return state_of(type).enabled; }
DType get_autocast_dtype(DeviceType type) { return state_of(type).dtype; }

AutocastGuard::AutocastGuard(DeviceType device_type, std::optional<DType> dtype, bool enabled)
    : type_(device_type) {
  DeviceState& s = state_of(device_type);
  const DType want = dtype.value_or(device_type == DeviceType::kCUDA ? kFloat16 : kBFloat16);
  if (device_type == DeviceType::kCPU) {
    LOOM_CHECK(want == kBFloat16, "AutocastGuard: the CPU autocasts to bfloat16 only, got ",
               dtype_name(want), " (as torch.autocast(\"cpu\"))");
  } else {
    LOOM_CHECK(want == kFloat16 || want == kBFloat16,
               "AutocastGuard: CUDA autocasts to float16 or bfloat16, got ", dtype_name(want));
  }
  previous_enabled_ = s.enabled;
  previous_dtype_ = s.dtype;
  s.enabled = enabled;
  s.dtype = want;
  ++t_state.depth;
}

AutocastGuard::~AutocastGuard() {
  DeviceState& s = state_of(type_);
  s.enabled = previous_enabled_;
  s.dtype = previous_dtype_;
  if (--t_state.depth == 0) clear_autocast_cache();
}

void clear_autocast_cache() { t_cache.clear(); }

namespace detail {

bool active() {
  return (t_state.cpu.enabled || t_state.cuda.enabled) && !t_state.suspended;
}

SuspendAutocast::SuspendAutocast() : previous_(t_state.suspended) { t_state.suspended = true; }
SuspendAutocast::~SuspendAutocast() { t_state.suspended = previous_; }

std::optional<CastPolicy> policy(const char* op, DeviceType type) {
  if (listed(kLowerBoth, op)) return CastPolicy::kLower;
  if (listed(kPromoteBoth, op)) return CastPolicy::kPromote;
  if (type == DeviceType::kCUDA ? listed(kFloat32Cuda, op) : listed(kFloat32Cpu, op))
    return CastPolicy::kFloat32;
  return std::nullopt;
}

std::vector<Tensor> cast_inputs(const char* op, std::vector<Tensor> inputs) {
  if (!active()) return inputs;
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs)
    if (t.defined()) {
      first = &t;
      break;
    }
  if (first == nullptr) return inputs;
  const DeviceType type = first->device().type;
  const DeviceState& s = state_of(type);
  if (!s.enabled) return inputs;
  const std::optional<CastPolicy> p = policy(op, type);
  if (!p) return inputs;
  DType target = s.dtype;
  if (*p == CastPolicy::kFloat32) {
    target = kFloat32;
  } else if (*p == CastPolicy::kPromote) {
    bool any = false;
    for (const Tensor& t : inputs) {
      if (!eligible(t)) continue;
      target = any ? promote_types(target, t.dtype()) : t.dtype();
      any = true;
    }
    if (!any) return inputs;
  }
  for (Tensor& t : inputs) t = cast_to(t, target, s.dtype);
  return inputs;
}

}  // namespace detail
}  // namespace amp
}  // namespace loom
