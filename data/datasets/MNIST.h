// datasets::MNIST: the standard IDX files (plain or gzip-compressed).
//
// root holds train-images-idx3-ubyte / train-labels-idx1-ubyte (train) or
// t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte (test), each optionally
// with a .gz suffix.  Images become float32 (1, 28, 28) scaled to [0, 1] and
// normalised with (x - mean) / std; targets are int64 class indices.
// A missing, corrupt or truncated file throws loom::Error naming the file and
// what was wrong (bad magic, count mismatch, short read at a byte offset).
#pragma once

#include <string>

#include "data/Dataset.h"

namespace loom {
namespace data {
namespace datasets {

struct Normalize {
  double mean = 0.1307;  // MNIST's training-set statistics
  double std = 0.3081;
};

class MNIST : public Dataset {
 public:
  MNIST(const std::string& root, bool train = true, Normalize normalize = Normalize());
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;
  const Tensor& images() const { return images_; }   // (N, 1, 28, 28) float32
  const Tensor& targets() const { return targets_; } // (N) int64

 private:
  Tensor images_;
  Tensor targets_;
};

// The raw IDX contents: magic number check, dims, and the payload bytes.
// Exposed for tests and tools.  Throws loom::Error naming the file.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};
IdxFile read_idx(const std::string& path, int expected_rank);
// `base` itself or `base`.gz, whichever exists; throws when neither does.
std::string find_idx(const std::string& root, const std::string& base);

}  // namespace datasets
}  // namespace data
}  // namespace loom
