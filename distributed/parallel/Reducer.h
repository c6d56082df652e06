// Reducer: the gradient side of DistributedDataParallel.
//
// It owns the buckets (distributed/parallel/Bucket.h) and a post-accumulate
// hook on every parameter.  After a synchronised forward, DDP arms it with
// prepare_for_backward(); during backward each hook copies its parameter's
// fresh gradient into the bucket slot (nothing to copy when .grad is the
// slot, with gradient_as_bucket_view) and marks it ready.  When a bucket's
// last gradient is ready its all-reduce (sum) is launched at once, while
// backward goes on; buckets launch strictly in index order, the same on every
// rank, so a bucket that is ready early waits for the ones before it.  The
// first hook queues a final callback (autograd::queue_callback) that runs
// when backward has finished every node: it waits for the all-reduces,
// divides by the world size and writes the averages back into .grad, so
// .grad holds the global average when backward() returns.
//
// Unused parameters.  A parameter that gets no gradient leaves its bucket
// incomplete.  Without find_unused_parameters the final callback throws a
// loom::Error naming those parameters (backward() rethrows it); the reducer
// is ready for the next iteration.  With it, prepare_for_backward() walks the
// autograd graph from the outputs, and every parameter it does not reach is
// marked ready at once (its slot holds its current .grad or zeros), so every
// rank still all-reduces every bucket; a parameter no rank used keeps an
// undefined .grad.
//
// Threads.  Hooks of parameters on other devices run on those devices'
// engine threads; one mutex guards the reducer's state.  Hooks hold the state
// weakly and are removed when the Reducer is destroyed.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/ProcessGroup.h"
#include "distributed/parallel/Bucket.h"

namespace loom {
namespace distributed {

// When things happened in one synchronised iteration (steady clock).  A time
// point left at its epoch (time_since_epoch() == 0) did not happen.
struct ReducerTimeline {
  using Clock = std::chrono::steady_clock;
  struct BucketTimes {
    size_t bucket = 0;
    size_t bytes = 0;
    Clock::time_point ready;     // its last gradient arrived
    Clock::time_point launched;  // its all-reduce was issued
    Clock::time_point finished;  // its all-reduce completed
  };
  Clock::time_point prepared;        // prepare_for_backward (end of forward)
  Clock::time_point backward_end;    // every autograd node had run
  Clock::time_point reduced;         // .grad held the averages
  std::vector<BucketTimes> buckets;  // in bucket index order

  // Milliseconds from `prepared` to t (negative when t did not happen).
  double ms(Clock::time_point t) const;
};

class Reducer {
 public:
  // params: the parameters to synchronise (leaves that require grad), names
  // their names for messages; bucket_indices from compute_bucket_assignment.
  // Registers a post-accumulate hook on every parameter.  With
  // gradient_as_bucket_view a parameter's existing .grad is copied into its
  // slot and .grad becomes the slot.
  Reducer(std::vector<Tensor> params, std::vector<std::string> names,
          const std::vector<std::vector<size_t>>& bucket_indices, ProcessGroupPtr group,
          bool find_unused_parameters, bool gradient_as_bucket_view);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Arms the hooks for the next backward.  `outputs` are the forward's
  // outputs, searched for unused parameters when find_unused_parameters.  If
  // the previous iteration's backward did not finish (it threw), its
  // all-reduces are waited for and its state dropped first.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  // Disarms: the next backward accumulates locally (DDP's no_sync()).
  void disarm();
  // Buckets travel as `wire` (float16 or bfloat16), divided by the world size
  // first, then are copied back (PyTorch's fp16_compress_hook /
  // bf16_compress_hook); nullopt: as they are.
  void set_compression(std::optional<DType> wire);

  const std::vector<Bucket>& buckets() const;
  const std::vector<Tensor>& parameters() const;
  // The timeline of the last synchronised iteration that reached its end.
  ReducerTimeline last_timeline() const;

  struct State;  // shared with the hooks

 private:
  std::shared_ptr<State> state_;
};

}  // namespace distributed
}  // namespace loom
