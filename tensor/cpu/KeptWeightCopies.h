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
// `max_bytes`.  Each copy comes with how to make it again: refresh() makes
// the copies of the current versions ahead of the passes that will want
// them (tensor/WeightReuse.h, prepare_kept_weights).  Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/Tensor.h"
#include "tensor/TensorImpl.h"
#include "tensor/WeightReuse.h"
#include "tensor/cpu/OneDnnConvolution.h"

namespace loom {
namespace cpu {

// The WeightVersion of `weight` now.
inline onednn::WeightVersion weight_version_of(const Tensor& weight) {
  return {std::shared_ptr<const void>(weight.impl()->version), weight.version(),
          weight.impl_ptr()};
}

template <typename Form>
class KeptWeightCopies {
 public:
  // Makes the copy anew from the weights it was made from (same buffer).
  using Make = std::function<Tensor()>;

  explicit KeptWeightCopies(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The copy of the weights at `data` of `id`'s tensor in `form`, or an
  // undefined tensor.
  Tensor find(const onednn::WeightVersion& id, const void* data, const Form& form) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (!it->copies(id, data, form)) continue;
      if (it->version == id.version) {
        it->used = true;
        return it->bytes;
      }
      bytes_ -= it->bytes.nbytes();
      kept_.erase(it);
      return Tensor();
    }
    return Tensor();
  }

  // Keeps `copy`, the weights at `data` in `form`, for `id`; `make` makes
  // it again for a later version.  `used`: a pass has read it (else it was
  // made ahead, by refresh()).
  void keep(const onednn::WeightVersion& id, const void* data, const Form& form,
            const Tensor& copy, Make make, bool used = true) {
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
    kept_.push_back(Kept{id.counter, id.tensor, data, id.version, form, copy, std::move(make),
                         used});
    bytes_ += copy.nbytes();
    while (bytes_ > max_bytes_ && !kept_.empty()) {
      bytes_ -= kept_.front().bytes.nbytes();
      kept_.pop_front();
    }
  }

  // Makes and keeps, for the weights of `device` written since their copy
  // was made, the copy of their current version: only for copies a pass
  // read (the forms in use; a copy made here and never read is not made
  // again), and only while the tensor lives with the same buffer.  Returns
  // how many copies it made.
  int refresh(Device device) {
    struct Due {
      onednn::WeightVersion id;
      const void* data;
      Form form;
      Make make;
    };
    std::vector<Due> due;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Kept& k : kept_) {
        if (!k.used || !k.make) continue;
        const std::shared_ptr<TensorImpl> impl = k.tensor.lock();
        if (impl == nullptr) continue;
        const Tensor weight(impl);
        if (weight.device() != device || weight.data_ptr() != k.data ||
            weight.version() == k.version)
          continue;
        due.push_back(Due{weight_version_of(weight), k.data, k.form, k.make});
        k.used = false;  // made once, not again for each refresh
      }
    }
    int made = 0;
    for (Due& d : due) {
      if (find(d.id, d.data, d.form).defined()) continue;  // a pass made it meanwhile
      Tensor copy = d.make();
      keep(d.id, d.data, d.form, copy, std::move(d.make), /*used=*/false);
      detail::count_weight_reuse(false);
      ++made;
    }
    return made;
  }

 private:
  struct Kept {
    std::shared_ptr<const void> counter;
    std::weak_ptr<TensorImpl> tensor;
    const void* data;
    uint64_t version;
    Form form;
    Tensor bytes;
    Make make;
    bool used;
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
