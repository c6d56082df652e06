#include "distributed/horovod/Compression.h"

namespace loom {
namespace distributed {
namespace horovod {

Tensor NoneCompressor::decompress(const Tensor& wire, DType original) const {
  return wire.dtype() == original ? wire : wire.to(original);
}

const CompressorPtr Compression::none = std::make_shared<NoneCompressor>();

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
