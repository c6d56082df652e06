#include "distributed/horovod/Compression.h"

namespace loom {
namespace distributed {
namespace horovod {

Tensor NoneCompressor::decompress(const Tensor& wire, DType original) const {
  return wire.dtype() == original ? wire : wire.to(original);
}

Tensor CastCompressor::compress(const Tensor& tensor) const {
  return tensor.is_floating_point() ? tensor.to(wire_) : tensor;
}

Tensor CastCompressor::decompress(const Tensor& wire, DType original) const {
  return wire.dtype() == original ? wire : wire.to(original);
}

std::string CastCompressor::name() const { return wire_ == kFloat16 ? "fp16" : "bf16"; }

const CompressorPtr Compression::none = std::make_shared<NoneCompressor>();
const CompressorPtr Compression::fp16 = std::make_shared<CastCompressor>(kFloat16);
const CompressorPtr Compression::bf16 = std::make_shared<CastCompressor>(kBFloat16);

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
