#include "tensor/ShapeUtil.h"

#include <sstream>

#include "tensor/Error.h"

namespace loom {

IntList contiguous_strides(const IntList& sizes) {
  IntList strides(sizes.size());
  int64_t s = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= sizes[d] > 1 ? sizes[d] : 1;
  }
  return strides;
}

int64_t numel_of(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string shape_str(const IntList& sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

IntList broadcast_shapes(const IntList& a, const IntList& b, const char* what) {
  const size_t n = std::max(a.size(), b.size());
  IntList out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LOOM_CHECK(da == db || da == 1 || db == 1, what, ": shapes ", shape_str(a), " and ",
               shape_str(b), " cannot be broadcast together (dimension ", i, ": ", da,
               " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<bool> dim_mask(const IntList& dims, int64_t rank, const char* what) {
  std::vector<bool> mask(rank, dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank, what);
    if (rank == 0) continue;
    LOOM_CHECK(!mask[w], what, ": dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

IntList reduced_shape(const IntList& sizes, const std::vector<bool>& mask, bool keepdim) {
  IntList out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d]) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

}  // namespace loom

namespace loom {

int64_t wrap_dim(int64_t dim, int64_t rank, const char* what) {
  const int64_t r = rank == 0 ? 1 : rank;  // scalars accept dims 0 and -1
  LOOM_CHECK(dim >= -r && dim < r, what, ": dimension out of range (expected to be in range [",
             -r, ", ", r - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

}  // namespace loom
