#include "tensor/MemoryFormat.h"

#include "tensor/Error.h"

namespace loom {

const char* memory_format_name(MemoryFormat format) {
  return format == MemoryFormat::kChannelsLast ? "channels_last" : "contiguous";
}

IntList strides_for(const IntList& sizes, MemoryFormat format) {
  if (format == MemoryFormat::kContiguous) return contiguous_strides(sizes);
  LOOM_CHECK(sizes.size() == 4, "channels_last: expected a 4-D (N, C, H, W) shape, got ",
             shape_str(sizes));
  const int64_t c = sizes[1], h = sizes[2], w = sizes[3];
  return {h * w * c, 1, w * c, c};
}

bool is_dense_in(const IntList& sizes, const IntList& strides, MemoryFormat format) {
  if (format == MemoryFormat::kChannelsLast && sizes.size() != 4) return false;
  // Walk the dims from the fastest-varying in format's order.
  static const int64_t kNhwc[] = {1, 3, 2, 0};
  const int64_t rank = static_cast<int64_t>(sizes.size());
  int64_t expected = 1;
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t d = format == MemoryFormat::kChannelsLast ? kNhwc[k] : rank - 1 - k;
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

}  // namespace loom
