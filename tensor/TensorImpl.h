// TensorImpl: what a Tensor handle points to.  Views share `storage` and
// `version` with their base; every in-place write bumps `version`, which
// autograd uses to detect a saved tensor modified before backward.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/AutogradMeta.h"
#include "tensor/DType.h"
#include "tensor/Device.h"
#include "tensor/Storage.h"

namespace loom {

struct TensorImpl {
  Storage storage;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
  int64_t storage_offset = 0;    // in elements
  DType dtype = DType::kFloat32;
  Device device;
  std::shared_ptr<std::atomic<uint64_t>> version =
      std::make_shared<std::atomic<uint64_t>>(0);
  // For views: the tensor this one is a view of (kept alive by the view).
  std::shared_ptr<TensorImpl> view_base;
  std::unique_ptr<AutogradMeta> autograd;  // null: does not require grad
};

}  // namespace loom
