// DType: the element types a tensor can hold, and compile-time dispatch on them.
//
// float16 and bfloat16 (tensor/Half.h) are storage types: copies, fills,
// printing and files handle them directly (dispatch_all_dtypes), and the ops
// compute them in float32 and round once (native::compute_dtype).  The kernel
// dispatchers (dispatch_dtype, dispatch_floating, dispatch_numeric) cover the
// compute types only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "tensor/Error.h"
#include "tensor/Half.h"

namespace loom {

// Appended in order: the values travel between processes and in files.
enum class DType : int8_t { kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool, kFloat16, kBFloat16 };

constexpr DType kFloat32 = DType::kFloat32;
constexpr DType kFloat64 = DType::kFloat64;
constexpr DType kInt64 = DType::kInt64;
constexpr DType kInt32 = DType::kInt32;
constexpr DType kUInt8 = DType::kUInt8;
constexpr DType kBool = DType::kBool;
constexpr DType kFloat16 = DType::kFloat16;
constexpr DType kBFloat16 = DType::kBFloat16;
constexpr DType kHalf = DType::kFloat16;
constexpr DType kFloat = DType::kFloat32;
constexpr DType kDouble = DType::kFloat64;
constexpr DType kLong = DType::kInt64;
constexpr DType kInt = DType::kInt32;

// Bytes per element.
size_t element_size(DType dtype);
// "float32", "int64", ... as PyTorch names them.
std::string dtype_name(DType dtype);
// float16, bfloat16, float32, float64.
bool is_floating_point(DType dtype);
// float16 and bfloat16: stored in 16 bits, computed in float32.
bool is_reduced_float(DType dtype);
// PyTorch's type promotion of two tensor operands: bool < uint8 < int32 <
// int64 < the floating types; float16 and bfloat16 promote to float32
// together, any float with float64 to float64.
DType promote_types(DType a, DType b);

std::ostream& operator<<(std::ostream& out, DType dtype);

// The C++ type behind a DType.
template <DType D> struct CppType;
template <> struct CppType<DType::kFloat32> { using type = float; };
template <> struct CppType<DType::kFloat64> { using type = double; };
template <> struct CppType<DType::kInt64> { using type = int64_t; };
template <> struct CppType<DType::kInt32> { using type = int32_t; };
template <> struct CppType<DType::kUInt8> { using type = uint8_t; };
template <> struct CppType<DType::kBool> { using type = bool; };
template <> struct CppType<DType::kFloat16> { using type = Half; };
template <> struct CppType<DType::kBFloat16> { using type = BFloat16; };

// The DType of a C++ type.
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kFloat32; }
template <> constexpr DType dtype_of<double>() { return DType::kFloat64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kInt64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kInt32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType dtype_of<bool>() { return DType::kBool; }
template <> constexpr DType dtype_of<Half>() { return DType::kFloat16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::kBFloat16; }

// A value standing for a type, passed to dispatch lambdas.
template <typename T> struct TypeTag { using type = T; };

// The C++ type a value of T is computed in: float for float16 and bfloat16
// (the compute_dtype of native/Copy.h, as a type), T itself otherwise.
template <typename T>
using compute_type_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Throws for a dtype a kernel dispatcher does not cover: float16 and
// bfloat16 reach kernels only through ops that compute them in float32.
[[noreturn]] void unsupported_dtype(const char* what, DType dtype);

// Calls fn(TypeTag<T>{}) with T the C++ type of `dtype`, for the compute
// types (not float16/bfloat16):
//   dispatch_dtype(t.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(TypeTag<float>{});
    case DType::kFloat64: return fn(TypeTag<double>{});
    case DType::kInt64: return fn(TypeTag<int64_t>{});
    case DType::kInt32: return fn(TypeTag<int32_t>{});
    case DType::kUInt8: return fn(TypeTag<uint8_t>{});
    case DType::kBool: return fn(TypeTag<bool>{});
    default: break;
  }
  unsupported_dtype("this kernel", dtype);
}

// As dispatch_dtype, float16 (Half) and bfloat16 (BFloat16) included: for
// code that moves or converts elements (copy, fill, print, files).
template <typename Fn>
decltype(auto) dispatch_all_dtypes(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat16: return fn(TypeTag<Half>{});
    case DType::kBFloat16: return fn(TypeTag<BFloat16>{});
    default: return dispatch_dtype(dtype, std::forward<Fn>(fn));
  }
}

// As dispatch_dtype, for the floating-point dtypes only; `what` names the op
// in the error for any other dtype.
template <typename Fn>
decltype(auto) dispatch_floating(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(TypeTag<float>{});
    case DType::kFloat64: return fn(TypeTag<double>{});
    case DType::kFloat16:
    case DType::kBFloat16:
      unsupported_dtype(what, dtype);
    default:
      LOOM_FAIL(what, ": expected a floating-point tensor (float32 or float64), got ",
                dtype_name(dtype));
  }
}

// As dispatch_floating, float16 (Half) and bfloat16 (BFloat16) included: for
// kernels that take 16-bit floats as they are (computing in compute_type_t).
template <typename Fn>
decltype(auto) dispatch_all_floating(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat16: return fn(TypeTag<Half>{});
    case DType::kBFloat16: return fn(TypeTag<BFloat16>{});
    default: return dispatch_floating(dtype, what, std::forward<Fn>(fn));
  }
}

// As dispatch_dtype without bool (arithmetic on numbers).
template <typename Fn>
decltype(auto) dispatch_numeric(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(TypeTag<float>{});
    case DType::kFloat64: return fn(TypeTag<double>{});
    case DType::kInt64: return fn(TypeTag<int64_t>{});
    case DType::kInt32: return fn(TypeTag<int32_t>{});
    case DType::kUInt8: return fn(TypeTag<uint8_t>{});
    default:
      LOOM_FAIL(what, ": not supported for dtype ", dtype_name(dtype));
  }
}

}  // namespace loom
