// Shape arithmetic shared by every op: dims, broadcasting, strides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

using IntList = std::vector<int64_t>;

// Wraps a negative dim into [0, rank) and checks its range; `what` names the op.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* what);
// Row-major strides of a contiguous tensor of these sizes.
IntList contiguous_strides(const IntList& sizes);
int64_t numel_of(const IntList& sizes);
// "[2, 3]".
std::string shape_str(const IntList& sizes);
// NumPy broadcasting of two shapes; throws naming `what` and both shapes.
IntList broadcast_shapes(const IntList& a, const IntList& b, const char* what);
// Normalises a list of reduction dims (wraps, checks duplicates); an empty
// list means all dims.  Returns a mask of length rank.
std::vector<bool> dim_mask(const IntList& dims, int64_t rank, const char* what);
// The shape after reducing the masked dims (kept as 1 with keepdim).
IntList reduced_shape(const IntList& sizes, const std::vector<bool>& mask, bool keepdim);

}  // namespace loom
