// Gradient compression for hvd all-reduces (Horovod's hvd.Compression).
//
//   hvd::DistributedOptimizer opt(sgd, model->named_parameters(), hvd::Compression::none);
//
// A Compressor turns a tensor into the tensor that travels (compress) and
// the reduced wire tensor back into the original dtype (decompress).
// Compression::none sends tensors as they are; Compression::fp16 sends
// floating tensors as float16 (Horovod's hvd.Compression.fp16: half the
// bytes, the sum rounded to float16 at every pairwise step) and
// Compression::bf16 as bfloat16 (float32's range, 8 significant bits).
// Integer tensors travel unchanged.  Custom compressors derive from
// Compressor; compress must be deterministic in its output's dtype and
// shape (every rank's wire tensors are matched).
#pragma once

#include <memory>
#include <string>

#include "tensor/Tensor.h"

namespace loom {
namespace distributed {
namespace horovod {

class Compressor {
 public:
  virtual ~Compressor() = default;
  // The tensor to send for `tensor` (may be `tensor` itself: then the
  // all-reduce works in place).
  virtual Tensor compress(const Tensor& tensor) const = 0;
  // The reduced wire tensor as a tensor of dtype `original`.
  virtual Tensor decompress(const Tensor& wire, DType original) const = 0;
  // For messages: "none", "fp16", ...
  virtual std::string name() const = 0;
};

using CompressorPtr = std::shared_ptr<const Compressor>;

// Sends tensors unchanged.
class NoneCompressor : public Compressor {
 public:
  Tensor compress(const Tensor& tensor) const override { return tensor; }
  Tensor decompress(const Tensor& wire, DType original) const override;
  std::string name() const override { return "none"; }
};

// Sends floating tensors as `wire` (float16 or bfloat16).
class CastCompressor : public Compressor {
 public:
  explicit CastCompressor(DType wire) : wire_(wire) {}
  Tensor compress(const Tensor& tensor) const override;
  Tensor decompress(const Tensor& wire, DType original) const override;
  std::string name() const override;

 private:
  DType wire_;
};

struct Compression {
  // hvd::Compression::none
  static const CompressorPtr none;
  // hvd::Compression::fp16
  static const CompressorPtr fp16;
  // float32's range in 16 bits (not in Horovod; the bfloat16 twin of fp16)
  static const CompressorPtr bf16;
};

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
