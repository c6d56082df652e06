#include "tensor/DType.h"

namespace loom {

size_t element_size(DType dtype) {
  return dispatch_dtype(dtype, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
  }
  return "unknown";
}

bool is_floating_point(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

namespace {
int rank_of(DType d) {
  switch (d) {
    case DType::kBool: return 0;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 2;
    case DType::kInt64: return 3;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 5;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) { return rank_of(a) >= rank_of(b) ? a : b; }

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

}  // namespace loom
