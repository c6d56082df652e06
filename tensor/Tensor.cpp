// The metadata half of Tensor; compute methods live with their op family.
#include "tensor/Tensor.h"

#include <sstream>

#include "tensor/CudaMemory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* what) {
  LOOM_CHECK(impl != nullptr, what, ": the tensor is undefined");
  return *impl;
}
}  // namespace



const IntList& Tensor::sizes() const { return checked(impl_, "sizes").sizes; }
const IntList& Tensor::strides() const { return checked(impl_, "strides").strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }

int64_t Tensor::size(int64_t d) const {
  LOOM_CHECK(dim() > 0, "size(", d, "): the tensor is 0-dimensional and has no dims");
  return sizes()[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  LOOM_CHECK(dim() > 0, "stride(", d, "): the tensor is 0-dimensional and has no dims");
  return strides()[wrap_dim(d, dim(), "stride")];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes()) n *= s;
  return n;
}

DType Tensor::dtype() const { return checked(impl_, "dtype").dtype; }
Device Tensor::device() const { return checked(impl_, "device").device; }
int64_t Tensor::storage_offset() const { return checked(impl_, "storage_offset").storage_offset; }
const Storage& Tensor::storage() const { return checked(impl_, "storage").storage; }
size_t Tensor::element_size() const { return loom::element_size(dtype()); }
size_t Tensor::nbytes() const { return numel() * element_size(); }
bool Tensor::is_floating_point() const { return loom::is_floating_point(dtype()); }
uint64_t Tensor::version() const { return checked(impl_, "version").version->load(); }
void Tensor::bump_version() const { ++*checked(impl_, "bump_version").version; }

bool Tensor::is_pinned() const {
  return defined() && is_cpu() && cuda::is_pinned(storage().data());
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  const auto& sz = sizes();
  const auto& st = strides();
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sz[d] == 1) continue;
    if (st[d] != expected) return false;
    expected *= sz[d];
  }
  return true;
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::kContiguous) return is_contiguous();
  return is_dense_in(sizes(), strides(), format);
}

MemoryFormat Tensor::suggest_memory_format() const {
  return channels_last_if(is_contiguous(MemoryFormat::kChannelsLast) && !is_contiguous());
}

std::string Tensor::describe() const {
  if (!defined()) return "[undefined tensor]";
  std::ostringstream out;
  out << "[" << dtype_name(dtype()) << " [";
  for (size_t i = 0; i < sizes().size(); ++i) out << (i ? ", " : "") << sizes()[i];
  out << "] on " << device() << "]";
  return out.str();
}

void* Tensor::data_ptr() const {
  const auto& impl = checked(impl_, "data_ptr");
  if (impl.storage.data() == nullptr) return nullptr;
  return static_cast<char*>(impl.storage.data()) + impl.storage_offset * element_size();
}

double Tensor::item() const { return item<double>(); }

// ---- autograd fields (plain data; behaviour lives in autograd/) --------------

AutogradMeta& Tensor::autograd_meta() const {
  auto& impl = const_cast<TensorImpl&>(checked(impl_, "autograd_meta"));
  if (!impl.autograd) impl.autograd = std::make_unique<AutogradMeta>();
  return *impl.autograd;
}

bool Tensor::requires_grad() const {
  const auto& impl = checked(impl_, "requires_grad");
  return impl.autograd && (impl.autograd->requires_grad || impl.autograd->grad_fn);
}

bool Tensor::is_leaf() const {
  const auto& impl = checked(impl_, "is_leaf");
  return !impl.autograd || !impl.autograd->grad_fn;
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  if (!is_leaf()) {
    LOOM_CHECK(requires_grad,
               "requires_grad_(false): you can only change requires_grad flags of leaf "
               "variables; use detach() to get a tensor without history");
    return *this;
  }
  LOOM_CHECK(!requires_grad || is_floating_point(),
             "requires_grad_: only floating-point tensors can require gradients, got ",
             describe());
  autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const auto& impl = checked(impl_, "grad");
  if (!impl.autograd || !impl.autograd->grad) return Tensor();
  return Tensor(impl.autograd->grad);
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    LOOM_CHECK(grad.sizes() == sizes(), "set_grad: gradient ", grad.describe(),
               " does not match the shape of tensor ", describe());
    LOOM_CHECK(grad.device() == device(), "set_grad: gradient is on ", grad.device(),
               " but the tensor is on ", device());
  }
  autograd_meta().grad = grad.impl_ptr();
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const auto& impl = checked(impl_, "grad_fn");
  return impl.autograd ? impl.autograd->grad_fn : nullptr;
}

uint32_t Tensor::output_nr() const {
  const auto& impl = checked(impl_, "output_nr");
  return impl.autograd ? impl.autograd->output_nr : 0;
}

bool Tensor::retains_grad() const {
  const auto& impl = checked(impl_, "retains_grad");
  return impl.autograd && impl.autograd->retains_grad;
}

Tensor Tensor::detach() const {
  const auto& src = checked(impl_, "detach");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = src.storage;
  impl->sizes = src.sizes;
  impl->strides = src.strides;
  impl->storage_offset = src.storage_offset;
  impl->dtype = src.dtype;
  impl->device = src.device;
  impl->version = src.version;  // shared: in-place writes stay visible
  impl->view_base = src.view_base;
  return Tensor(impl);
}

Tensor& Tensor::detach_() {
  auto& impl = const_cast<TensorImpl&>(checked(impl_, "detach_"));
  if (impl.autograd) {
    impl.autograd->grad_fn.reset();
    impl.autograd->output_nr = 0;
    impl.autograd->requires_grad = false;
  }
  return *this;
}

namespace detail {
Tensor host_values(const Tensor& t, DType dtype) {
  return native::contiguous(native::to(t, Device(kCPU), dtype));
}
}  // namespace detail

}  // namespace loom
