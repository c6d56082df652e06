// Tensor: a shared handle to an n-dimensional array on a device.
//
// Copying a Tensor copies the handle: both refer to the same TensorImpl.
// `clone()` copies the data; view methods (view, permute, narrow, ...) return
// new handles aliasing the same Storage.  Methods that compute are declared
// here and defined with their op family in autograd/functions/, so they record
// the graph when an input requires grad.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/DType.h"
#include "tensor/Device.h"
#include "tensor/Error.h"
#include "tensor/MemoryFormat.h"
#include "tensor/Scalar.h"
#include "tensor/Storage.h"
#include "tensor/TensorImpl.h"

namespace loom {

using IntList = std::vector<int64_t>;

namespace autograd {
class Node;
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- identity and metadata ------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  const IntList& sizes() const;
  const IntList& shape() const { return sizes(); }
  // Size of one dimension; negative dims count from the end.
  int64_t size(int64_t dim) const;
  const IntList& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  int64_t storage_offset() const;
  const Storage& storage() const;
  size_t element_size() const;
  size_t nbytes() const;
  bool is_contiguous() const;
  // Dense in `format` (MemoryFormat.h): is_contiguous(kContiguous) == is_contiguous().
  bool is_contiguous(MemoryFormat format) const;
  // kChannelsLast for a 4-D tensor dense in channels last and not also
  // contiguous (the layout an op's result keeps), else kContiguous.
  MemoryFormat suggest_memory_format() const;
  bool is_floating_point() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  // True for a CPU tensor whose memory is page-locked (cuda::pinned_empty),
  // which host<->GPU copies can read and write asynchronously.  False without
  // CUDA.
  bool is_pinned() const;
  // Counts in-place writes to this tensor's storage (shared with views).
  uint64_t version() const;
  void bump_version() const;
  // "[float32 [2, 3] on cpu]", for messages.
  std::string describe() const;

  // ---- raw data (CPU tensors) -----------------------------------------------
  void* data_ptr() const;  // first element
  template <typename T> T* data_ptr() const;
  // The values in row-major order (copies; any layout, any device).
  template <typename T> std::vector<T> to_vector() const;
  // The single value of a one-element tensor; a sync point on CUDA.
  template <typename T> T item() const;
  double item() const;

  // ---- autograd ---------------------------------------------------------------
  bool requires_grad() const;
  // Marks a leaf as needing a gradient.  Throws for non-leaves being turned off
  // and for non-floating dtypes.
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  // The accumulated gradient (undefined until a backward reached this tensor).
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  uint32_t output_nr() const;
  AutogradMeta& autograd_meta() const;  // creates it on first use
  bool has_autograd_meta() const { return impl_ && impl_->autograd != nullptr; }
  // Runs backprop from this tensor.  `gradient` may be omitted for a
  // one-element tensor.  Without retain_graph the graph's saved tensors are
  // freed, and a second backward through it throws.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  // A tensor sharing this one's data (and version counter) with no history.
  Tensor detach() const;
  Tensor& detach_();
  // Keeps .grad for a non-leaf after backward.
  void retain_grad() const;
  bool retains_grad() const;
  // A hook on this tensor's gradient; it may return a replacement (or an
  // undefined Tensor to keep the gradient unchanged).
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // A hook run after a leaf's gradient has been accumulated into .grad.
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) const;

  // ---- views (share storage) ------------------------------------------------
  Tensor view(IntList sizes) const;
  Tensor reshape(IntList sizes) const;
  Tensor permute(IntList dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  // Elements start, start+step, ... < end along dim (Python's [start:end:step]).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor expand(IntList sizes) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor as_strided(IntList sizes, IntList strides, int64_t storage_offset) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split_with_sizes(IntList split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- copies -----------------------------------------------------------------
  Tensor contiguous() const;
  // This tensor when already dense in `format`, else a copy laid out so
  // (differentiable; channels last needs 4 dims).
  Tensor contiguous(MemoryFormat format) const;
  Tensor clone() const;
  // Copies src (broadcast to this shape, any dtype/device) into this tensor.
  // non_blocking: a copy between pinned host memory and a GPU returns before
  // it has run, as in to() below.
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  // A copy on `device` (this tensor itself when already there); differentiable.
  // non_blocking: a copy between pinned host memory (is_pinned) and a GPU
  // returns before it has run (synchronize the device or stream before
  // reading the result on the host); every other copy waits.
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  Tensor cpu() const { return to(Device(kCPU)); }
  Tensor cuda(int index = 0) const { return to(Device(kCUDA, index)); }
  Tensor to_float() const { return to(kFloat32); }

  // ---- in-place fills ---------------------------------------------------------
  Tensor& fill_(Scalar value);
  Tensor& zero_();
  Tensor& uniform_(double low = 0, double high = 1);
  Tensor& normal_(double mean = 0, double std = 1);

  // ---- elementwise --------------------------------------------------------
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor add(Scalar other) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(Scalar other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& add_(Scalar other);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(Scalar other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor pow(Scalar exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor relu() const;
  Tensor& relu_();
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;

  // ---- reductions ---------------------------------------------------------
  Tensor sum() const;
  Tensor sum(IntList dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(IntList dims, bool keepdim = false) const;
  // Variance with Bessel's correction when unbiased (PyTorch's default).
  Tensor var(bool unbiased = true) const;
  Tensor var(IntList dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std(bool unbiased = true) const;
  Tensor std(IntList dims, bool unbiased = true, bool keepdim = false) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- linear algebra -----------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;

  // ---- indexing -----------------------------------------------------------
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Arithmetic operators, as in libtorch.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
// Elementwise comparisons (bool tensors, not differentiable), as in libtorch.
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

// Prints like PyTorch: the values, then shape, dtype and device.
std::ostream& operator<<(std::ostream& out, const Tensor& t);

// ---- template definitions ---------------------------------------------------

template <typename T>
T* Tensor::data_ptr() const {
  LOOM_CHECK(defined(), "data_ptr: the tensor is undefined");
  LOOM_CHECK(dtype_of<T>() == dtype(), "data_ptr<", dtype_name(dtype_of<T>()),
             ">: the tensor holds ", dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}

namespace detail {
// t's values as a contiguous CPU tensor of `dtype`: t itself when it is one,
// else a copy (never recorded for autograd).
Tensor host_values(const Tensor& t, DType dtype);
}  // namespace detail

template <typename T>
std::vector<T> Tensor::to_vector() const {
  LOOM_CHECK(defined(), "to_vector: the tensor is undefined");
  const Tensor c = detail::host_values(*this, dtype_of<T>());
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}

template <typename T>
T Tensor::item() const {
  LOOM_CHECK(defined() && numel() == 1, "item: expected a tensor with one element, got ",
             defined() ? describe() : std::string("an undefined tensor"));
  return to_vector<T>()[0];
}

}  // namespace loom
