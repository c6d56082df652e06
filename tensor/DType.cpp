#include "tensor/DType.h"

namespace loom {

size_t element_size(DType dtype) {
  return dispatch_all_dtypes(dtype, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

bool is_floating_point(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || is_reduced_float(dtype);
}

bool is_reduced_float(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

void unsupported_dtype(const char* what, DType dtype) {
  if (is_reduced_float(dtype)) {
    LOOM_FAIL(what, ": ", dtype_name(dtype), " is not supported here; convert with "
              ".to(kFloat32) first");
  }
  LOOM_FAIL(what, ": unknown dtype ", static_cast<int>(dtype));
}

namespace {
int rank_of(DType d) {
  switch (d) {
    case DType::kBool: return 0;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 2;
    case DType::kInt64: return 3;
    case DType::kFloat16: return 4;
    case DType::kBFloat16: return 4;
    case DType::kFloat32: return 5;
    case DType::kFloat64: return 6;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  // The two 16-bit floats share a rank: neither holds the other's values.
  if (a != b && is_reduced_float(a) && is_reduced_float(b)) return DType::kFloat32;
  return rank_of(a) >= rank_of(b) ? a : b;
}

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

}  // namespace loom
