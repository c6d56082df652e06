// Copies of weight tensors made for a kernel (reordered into oneDNN's
// layouts: OneDnnConvolution.cpp; Winograd-transformed: Winograd.cpp), kept
// under WeightReuse (tensor/WeightReuse.h) for later passes that read the
// same weights at the same version.
//
// A copy is keyed by the weight tensor's version counter and buffer, the
// counter's value when it was made, and a Form (the layout or transform,
// compared with ==).  A copy found stale (the weights written since) goes
// at once; copies of tensors nothing else holds (only the copy keeps their
// version counter) go when the next is kept; the oldest go beyond
// `max_bytes`.  Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>

#include "tensor/Tensor.h"
#include "tensor/cpu/OneDnnConvolution.h"

namespace loom {
namespace cpu {

template <typename Form>
class KeptWeightCopies {
 public:
  explicit KeptWeightCopies(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The copy of the weights at `data` of `id`'s tensor in `form`, or an
  // undefined tensor.
  Tensor find(const onednn::WeightVersion& id, const void* data, const Form& form) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (!it->copies(id, data, form)) continue;
      if (it->version == id.version) return it->bytes;
      bytes_ -= it->bytes.nbytes();
      kept_.erase(it);
      return Tensor();
    }
    return Tensor();
  }

  // Keeps `copy`, the weights at `data` in `form`, for `id`.
  void keep(const onednn::WeightVersion& id, const void* data, const Form& form,
            const Tensor& copy) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end();) {
      if (it->copies(id, data, form) && it->version == id.version)
        return;  // another thread kept the same copy meanwhile
      const bool stale = it->copies(id, data, form);
      if (stale || it->counter.use_count() == 1) {
        bytes_ -= it->bytes.nbytes();
        it = kept_.erase(it);
      } else {
        ++it;
      }
    }
    kept_.push_back(Kept{id.counter, data, id.version, form, copy});
    bytes_ += copy.nbytes();
    while (bytes_ > max_bytes_ && !kept_.empty()) {
      bytes_ -= kept_.front().bytes.nbytes();
      kept_.pop_front();
    }
  }

 private:
  struct Kept {
    std::shared_ptr<const void> counter;
    const void* data;
    uint64_t version;
    Form form;
    Tensor bytes;
    // Whether this is a copy of the weights at `at` of `id`'s tensor in
    // `f` (at any version).
    bool copies(const onednn::WeightVersion& id, const void* at, const Form& f) const {
      return counter == id.counter && data == at && form == f;
    }
  };
  const int64_t max_bytes_;
  std::mutex mutex_;
  std::deque<Kept> kept_;
  int64_t bytes_ = 0;
};

}  // namespace cpu
}  // namespace loom
