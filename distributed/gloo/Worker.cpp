// ProcessGroupGloo's queue and workers: enqueue (issue order, ordering
// across workers) and Worker::loop (the consistency check, the small-message
// path, then the collective).  The state is in distributed/gloo/GlooState.h.
//
// Design notes:
// * Workers.  `threads` workers, each with its own Gloo context (own
//   connections).  Collective number k goes to worker k % threads, the same
//   on every rank, so each worker sees the same sequence everywhere.  Two
//   collectives may therefore run at the same time; one that touches memory
//   an earlier unfinished one touches waits for it first, so results are as
//   if run in issue order.  barrier() waits for every earlier collective.
// * Small messages.  Latency, not bytes, is what a small collective costs:
//   Gloo's ring all-reduce takes 2(n-1) message rounds whatever the size.  So
//   all_reduce, broadcast and the all-gathers of at most small_message_bytes
//   per rank run as one all-gather of every rank's bytes (n-1 rounds), and
//   each rank reduces the gathered values itself in rank order (identical
//   results on every rank).  Up to 4 KiB (kRecordPayload) the data even
//   travels inside the consistency check's own all-gather (every rank's
//   record is its description plus a fixed 4 KiB payload area, so records
//   always have equal size and a mismatch stays an error, never an abort):
//   one exchange instead of three, check included.  Larger small messages go
//   as their own all-gather once the check has confirmed equal sizes.  Every
//   rank must use the same small_message_bytes; 0 turns the path off.
#include <gloo/allgather.h>

#include <algorithm>

#include "distributed/gloo/GlooState.h"

namespace loom {
namespace distributed {

using gloo_glue::Clock;
using gloo_glue::remaining;

WorkPtr ProcessGroupGloo::enqueue(std::shared_ptr<Task> task) {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  task->seq = next_seq_++;
  task->description = gloo_glue::describe(task->sig, rank_, size_);
  task->work = std::make_shared<Work>(task->description);
  const std::string broken = shared_->broken_message();
  if (!broken.empty()) {
    try {
      shared_->check_healthy(task->description);
    } catch (const Error&) {
      task->work->finish(std::current_exception());
    }
    return task->work;
  }
  if (workers_.size() > 1) {
    // Order against unfinished collectives on other workers.
    std::vector<std::shared_ptr<InFlight>> still;
    for (auto& f : in_flight_) {
      if (f->work->is_completed()) continue;
      still.push_back(f);
      bool overlap = task->after_all;
      for (const auto& a : task->memory)
        for (const auto& b : f->memory)
          if (a.first < b.second && b.first < a.second) overlap = true;
      if (overlap) task->after.push_back(f->work);
    }
    in_flight_.swap(still);
    auto f = std::make_shared<InFlight>();
    f->work = task->work;
    f->memory = task->memory;
    in_flight_.push_back(f);
  }
  WorkPtr work = task->work;
  Worker& w = *workers_[task->seq % workers_.size()];
  {
    std::lock_guard<std::mutex> wl(w.mutex);
    w.queue.push_back(std::move(task));
  }
  w.cv.notify_one();
  return work;
}

void ProcessGroupGloo::Worker::loop() {
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      task = std::move(queue.front());
      queue.pop_front();
    }
    const uint32_t tag = next_tag;
    next_tag = next_tag == 0x7fffffffu ? 1 : next_tag + 1;
    for (const auto& w : task->after) {
      try {
        w->wait();
      } catch (...) {  // its own Work reports it
      }
    }
    const auto deadline = Clock::now() + shared->timeout;
    const std::exception_ptr error = shared->capture(task->description, deadline, [&] {
      shared->check_healthy(task->description);
      for (const Event& e : task->ready) e.synchronize();
      const bool small = shared->size > 1 && task->payload_bytes > 0 &&
                         task->payload_bytes <= shared->small_bytes;
      if (shared->check && shared->size > 1) {
        // The check has verified that every rank's payload has the same
        // size before a separate all-gather sends it.
        const bool in_record = small && task->payload_bytes <= shared->record_bytes;
        exchange_signatures(*task, deadline, in_record);
        if (!in_record) {
          if (small) {
            gather_payloads(*task, tag, deadline);
          } else {
            task->run(context, tag, deadline);
          }
        }
      } else if (small) {
        gather_payloads(*task, tag, deadline);
      } else {
        task->run(context, tag, deadline);
      }
    });
    task->work->finish(error);
  }
}

void ProcessGroupGloo::Worker::gather_payloads(const Task& task, uint32_t tag,
                                               Clock::time_point deadline) {
  const size_t words = (task.payload_bytes + 7) / 8;
  mine_buffer.assign(words, 0);
  all_buffer.resize(words * shared->size);
  task.put(reinterpret_cast<char*>(mine_buffer.data()));
  ::gloo::AllgatherOptions opts(context);
  opts.setInput(mine_buffer.data(), words);
  opts.setOutput(all_buffer.data(), all_buffer.size());
  opts.setTag(tag);
  opts.setTimeout(remaining(deadline));
  ::gloo::allgather(opts);
  task.take(reinterpret_cast<const char*>(all_buffer.data()), words * 8);
}

// Every rank contributes its signature followed by a payload area of
// record_bytes (the same size for every collective, so records always
// match); all compare all against rank 0 and fail with the same message when
// they differ (gloo/ConsistencyCheck.h).
void ProcessGroupGloo::Worker::exchange_signatures(const Task& task, Clock::time_point deadline,
                                                   bool small) {
  const int size = shared->size;
  const std::vector<int64_t> sig = task.sig.encode(task.seq, size);
  const size_t record = sig.size() + shared->record_bytes / 8;
  mine_buffer.resize(record);
  all_buffer.resize(record * size);
  std::copy(sig.begin(), sig.end(), mine_buffer.begin());
  char* payload = reinterpret_cast<char*>(mine_buffer.data() + sig.size());
  if (small) task.put(payload);
  ::gloo::AllgatherOptions opts(context);
  opts.setInput(mine_buffer.data(), record);
  opts.setOutput(all_buffer.data(), all_buffer.size());
  opts.setTag(0);
  opts.setTimeout(remaining(deadline));
  ::gloo::allgather(opts);
  gloo_glue::compare_signatures(all_buffer.data(), record, shared->rank, size, task.seq,
                                task.description);
  if (small)
    task.take(reinterpret_cast<const char*>(all_buffer.data() + sig.size()), record * 8);
}

}  // namespace distributed
}  // namespace loom
