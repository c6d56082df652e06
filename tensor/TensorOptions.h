// TensorOptions: dtype, device and requires_grad for factories, with chained
// setters as in libtorch: `zeros({2, 3}, TensorOptions().dtype(kInt64))`.
#pragma once

#include "tensor/DType.h"
#include "tensor/Device.h"

namespace loom {

struct TensorOptions {
  DType dtype_ = DType::kFloat32;
  Device device_;
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}        // NOLINT: implicit, as in libtorch
  TensorOptions(Device d) : device_(d) {}      // NOLINT
  TensorOptions(DeviceType t) : device_(t) {}  // NOLINT

  TensorOptions& dtype(DType d) { dtype_ = d; return *this; }
  TensorOptions& device(Device d) { device_ = d; return *this; }
  TensorOptions& requires_grad(bool r = true) { requires_grad_ = r; return *this; }
};

}  // namespace loom
