// What loom's oneDNN kernels share (convolutions, matrix products): the one
// CPU engine, created on first use and never destroyed (kernels may run at
// exit), and the cache of the primitives they make.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include <dnnl.hpp>

#include "tensor/Parallel.h"
#include "tensor/cpu/OmpThreads.h"

namespace loom {
namespace cpu {
namespace onednn {

inline const dnnl::engine& engine() {
  static const dnnl::engine* eng = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *eng;
}

// Entries (a primitive and what runs it) made once per key and kept:
// creating a primitive descriptor walks oneDNN's kernel list and costs far
// more than a small convolution or product.  Bounded: a program that sweeps
// many shapes starts over rather than growing without end.  make() runs
// outside the lock (two threads may both make an entry; one is kept), on
// the caller's intra-op thread count (oneDNN sizes its kernels by it).
template <typename Key, typename Entry, typename Map = std::map<Key, std::shared_ptr<const Entry>>>
class PrimitiveCache {
 public:
  template <typename Make>
  std::shared_ptr<const Entry> get(const Key& key, const Make& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    std::shared_ptr<const Entry> made;
    {
      OmpThreads threads(get_num_threads());
      made = std::make_shared<const Entry>(make());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    return entries_.emplace(key, made).first->second;
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  std::mutex mutex_;
  Map entries_;
};

}  // namespace onednn
}  // namespace cpu
}  // namespace loom
