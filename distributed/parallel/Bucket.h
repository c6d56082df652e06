// Gradient buckets for DistributedDataParallel.
//
// All-reducing every gradient on its own costs one network round per
// parameter; all-reducing them all at the end leaves the network idle during
// backward.  DDP groups parameters into buckets of about bucket_cap_mb and
// all-reduces a bucket as soon as its last gradient is ready.  Parameters go
// into buckets in reverse registration order (roughly the order backward
// produces their gradients), so the first bucket fills first; it is kept
// small (1 MiB, as torch's first bucket) so communication starts early.
// A bucket holds one dtype on one device; a model spread over two devices
// gets buckets on each.
//
// Each bucket owns one flat contiguous buffer; `views[i]` is parameter i's
// slot in it, shaped like the parameter.  With gradient_as_bucket_view the
// parameters' .grad are these views, so no copy is made in or out.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace distributed {

// torch's first bucket size (dist._DEFAULT_FIRST_BUCKET_BYTES).
constexpr size_t kDefaultFirstBucketBytes = size_t(1) << 20;

// Splits parameters into buckets: indices into `params`, each bucket one
// dtype and device.  Parameters are taken in reverse order; a bucket closes
// once its size reaches its limit (first_bucket_bytes for the first bucket of
// each dtype/device, bucket_bytes after), so a bucket exceeds its limit by at
// most its last parameter.  Buckets are returned in the order they close, the
// order DDP all-reduces them.  Throws on an undefined parameter or a zero limit.
std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<Tensor>& params,
                                                           size_t first_bucket_bytes,
                                                           size_t bucket_bytes);

struct Bucket {
  std::vector<size_t> params;    // indices into the reducer's parameter list
  std::vector<int64_t> offsets;  // element offset of each parameter in flat
  Tensor flat;                   // (total elements) contiguous gradient buffer
  std::vector<Tensor> views;     // views[i]: flat[offsets[i] : + numel] shaped like params[i]
  DType dtype = kFloat32;
  Device device;

  size_t nbytes() const { return flat.defined() ? flat.nbytes() : 0; }
};

// Allocates the bucket's zeroed flat buffer and the per-parameter views.
Bucket make_bucket(const std::vector<Tensor>& params, const std::vector<size_t>& indices);

}  // namespace distributed
}  // namespace loom
