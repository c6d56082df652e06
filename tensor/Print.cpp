// operator<< for Tensor, in PyTorch's layout:
//
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], grad_fn=<MulBackward>)
//   [ float32 [2, 2] on cpu ]
//
// Floats print with 4 decimals (scientific when the magnitudes call for it,
// as PyTorch decides), integers plainly, bools as True/False; every element
// is right-aligned to the widest.  Tensors of more than 1000 elements are
// summarised: each dim longer than 6 shows its first and last 3 entries
// around "...".  Values are read from a contiguous CPU copy.
#include "tensor/Print.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/ShapeUtil.h"
#include "tensor/Tensor.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace {

constexpr int64_t kThreshold = 1000;  // summarise above this many elements
constexpr int64_t kEdgeItems = 3;     // entries kept at each end of a long dim
constexpr size_t kLineWidth = 80;
constexpr int64_t kEllipsis = -1;     // marks "..." in a list of shown indices
const char kPrefix[] = "tensor(";

std::atomic<GradFnNamer> g_grad_fn_namer{nullptr};

// The indices of each dim that are printed (kEllipsis where entries are left out).
std::vector<IntList> shown_indices(const IntList& sizes, bool summarize) {
  std::vector<IntList> shown;
  for (int64_t size : sizes) {
    IntList idx;
    if (summarize && size > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(kEllipsis);
      for (int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < size; ++i) idx.push_back(i);
    }
    shown.push_back(idx);
  }
  return shown;
}

// Calls fn(linear offset) for every shown element of a contiguous tensor.
template <typename Fn>
void for_each_shown(const std::vector<IntList>& shown, const IntList& strides, size_t depth,
                    int64_t offset, const Fn& fn) {
  if (depth == shown.size()) return fn(offset);
  for (int64_t i : shown[depth])
    if (i != kEllipsis) for_each_shown(shown, strides, depth + 1, offset + i * strides[depth], fn);
}

// Turns element values into strings.
class ElementFormatter {
 public:
  ElementFormatter(const Tensor& host, const std::vector<IntList>& shown)
      : host_(host), floating_(host.is_floating_point()) {
    if (!floating_) return;
    double max_abs = 0, min_abs = INFINITY;
    for_each_shown(shown, host.strides(), 0, 0, [&](int64_t off) {
      const double v = std::abs(value(off));
      if (!std::isfinite(v) || v == 0) return;
      max_abs = std::max(max_abs, v);
      min_abs = std::min(min_abs, v);
    });
    sci_ = max_abs > 0 && (max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4);
  }

  std::string operator()(int64_t off) const {
    if (host_.dtype() == kBool) return static_cast<const bool*>(host_.data_ptr())[off] ? "True" : "False";
    if (!floating_) {
      return dispatch_dtype(host_.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        return std::to_string(static_cast<int64_t>(static_cast<const T*>(host_.data_ptr())[off]));
      });
    }
    const double v = value(off);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    std::snprintf(buf, sizeof(buf), sci_ ? "%.4e" : "%.4f", v);
    return buf;
  }

 private:
  double value(int64_t off) const {
    return dispatch_all_dtypes(host_.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T v = static_cast<const T*>(host_.data_ptr())[off];
      if constexpr (std::is_same<T, double>::value) {
        return v;
      } else {
        return static_cast<double>(static_cast<float>(v));  // Half and BFloat16 via float
      }
    });
  }

  Tensor host_;
  bool floating_;
  bool sci_ = false;
};

// Writes the nested brackets of a contiguous host tensor.
class ValuePrinter {
 public:
  ValuePrinter(std::ostream& out, const Tensor& host, const std::vector<IntList>& shown,
               const ElementFormatter& format, size_t width)
      : out_(out), host_(host), shown_(shown), format_(format), width_(width) {}

  void print(size_t depth, int64_t offset) {
    const size_t rank = shown_.size();
    const size_t indent = sizeof(kPrefix) - 1 + depth + 1;  // column of this level's items
    out_ << "[";
    if (depth + 1 == rank) {
      // The innermost dim: wrapped so a line stays within kLineWidth.
      const size_t per_line = std::max<size_t>(1, (kLineWidth - indent) / (width_ + 2));
      size_t on_line = 0;
      for (size_t j = 0; j < shown_[depth].size(); ++j) {
        if (j > 0) {
          out_ << ",";
          if (on_line == per_line) {
            out_ << "\n" << std::string(indent, ' ');
            on_line = 0;
          } else {
            out_ << " ";
          }
        }
        const int64_t i = shown_[depth][j];
        out_ << (i == kEllipsis ? pad("...") : pad(format_(offset + i * host_.strides()[depth])));
        ++on_line;
      }
    } else {
      for (size_t j = 0; j < shown_[depth].size(); ++j) {
        if (j > 0) out_ << "," << std::string(rank - depth - 1, '\n') << std::string(indent, ' ');
        const int64_t i = shown_[depth][j];
        if (i == kEllipsis) {
          out_ << "...";
        } else {
          print(depth + 1, offset + i * host_.strides()[depth]);
        }
      }
    }
    out_ << "]";
  }

 private:
  std::string pad(const std::string& s) const {
    return s.size() >= width_ ? s : std::string(width_ - s.size(), ' ') + s;
  }

  std::ostream& out_;
  const Tensor& host_;
  const std::vector<IntList>& shown_;
  const ElementFormatter& format_;
  size_t width_;
};

void print_values(std::ostream& out, const Tensor& t) {
  const Tensor host = native::contiguous(native::to(t, Device(kCPU), t.dtype()));
  if (host.numel() == 0) {
    out << "[]";
    return;
  }
  const auto shown = shown_indices(host.sizes(), host.numel() > kThreshold);
  const ElementFormatter format(host, shown);
  size_t width = 0;
  for_each_shown(shown, host.strides(), 0, 0,
                 [&](int64_t off) { width = std::max(width, format(off).size()); });
  if (host.dim() == 0) {
    out << format(0);
    return;
  }
  ValuePrinter(out, host, shown, format, width).print(0, 0);
}

}  // namespace

void set_grad_fn_namer(GradFnNamer namer) { g_grad_fn_namer.store(namer); }

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "[ undefined tensor ]";
  std::ostringstream s;  // built whole, so the stream's own flags do not interfere
  s << kPrefix;
  print_values(s, t);
  const GradFnNamer namer = g_grad_fn_namer.load();
  const std::string grad_fn = namer ? namer(t) : std::string();
  if (!grad_fn.empty()) {
    s << ", grad_fn=<" << grad_fn << ">";
  } else if (t.requires_grad()) {
    s << ", requires_grad=True";
  }
  s << ")\n[ " << dtype_name(t.dtype()) << " " << shape_str(t.sizes()) << " on " << t.device()
    << " ]";
  return out << s.str();
}

}  // namespace loom
