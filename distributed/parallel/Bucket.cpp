#include "distributed/parallel/Bucket.h"

#include <algorithm>
#include <map>
#include <utility>

#include "tensor/Factory.h"

namespace loom {
namespace distributed {

std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<Tensor>& params,
                                                           size_t first_bucket_bytes,
                                                           size_t bucket_bytes) {
  LOOM_CHECK(first_bucket_bytes > 0 && bucket_bytes > 0,
             "compute_bucket_assignment: bucket limits must be positive, got first ",
             first_bucket_bytes, " bytes and ", bucket_bytes, " bytes");
  struct Open {
    std::vector<size_t> indices;
    size_t bytes = 0;
    bool closed_one = false;  // a bucket of this key was closed: use bucket_bytes
  };
  std::map<std::pair<DType, Device>, Open> open;
  std::vector<std::vector<size_t>> result;
  for (size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k];
    LOOM_CHECK(p.defined(), "compute_bucket_assignment: parameter ", k, " is undefined");
    Open& b = open[{p.dtype(), p.device()}];
    b.indices.push_back(k);
    b.bytes += p.nbytes();
    const size_t limit = b.closed_one ? bucket_bytes : first_bucket_bytes;
    if (b.bytes >= limit) {
      result.push_back(std::move(b.indices));
      b.indices.clear();
      b.bytes = 0;
      b.closed_one = true;
    }
  }
  // The still-open buckets close at the end, in the order of their first
  // parameter (reverse registration order, like the closed ones).
  std::vector<std::vector<size_t>> rest;
  for (auto& [key, b] : open)
    if (!b.indices.empty()) rest.push_back(std::move(b.indices));
  std::sort(rest.begin(), rest.end(),
            [](const std::vector<size_t>& a, const std::vector<size_t>& b) { return a[0] > b[0]; });
  for (auto& r : rest) result.push_back(std::move(r));
  return result;
}

Bucket make_bucket(const std::vector<Tensor>& params, const std::vector<size_t>& indices) {
  LOOM_CHECK(!indices.empty(), "make_bucket: a bucket needs at least one parameter");
  Bucket bucket;
  bucket.params = indices;
  bucket.dtype = params[indices[0]].dtype();
  bucket.device = params[indices[0]].device();
  int64_t total = 0;
  for (size_t i : indices) {
    const Tensor& p = params[i];
    LOOM_CHECK(p.dtype() == bucket.dtype && p.device() == bucket.device,
               "make_bucket: parameter ", i, " is ", p.describe(), " but the bucket holds ",
               dtype_name(bucket.dtype), " on ", bucket.device);
    bucket.offsets.push_back(total);
    total += p.numel();
  }
  bucket.flat = zeros({total}, TensorOptions(bucket.dtype).device(bucket.device));
  for (size_t j = 0; j < indices.size(); ++j) {
    const Tensor& p = params[indices[j]];
    bucket.views.push_back(bucket.flat.narrow(0, bucket.offsets[j], p.numel()).view(p.sizes()));
  }
  return bucket;
}

}  // namespace distributed
}  // namespace loom
