#include "distributed/horovod/Controller.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "autograd/GradMode.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/ThreadName.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kMaxBackoff{64};

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  out << "]";
  return out.str();
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Controller::Controller(ProcessGroupPtr cpu_group, ProcessGroupPtr cuda_group, ControllerOptions options)
    : options_(options) {
  LOOM_CHECK(cpu_group != nullptr, "hvd: the controller needs a CPU process group");
  LOOM_CHECK(options.fusion_threshold >= 0, "hvd: the fusion threshold must be >= 0 bytes, got ",
             options.fusion_threshold);
  LOOM_CHECK(!cuda_group || cuda_group->size() == cpu_group->size(),
             "hvd: the CUDA process group has ", cuda_group ? cuda_group->size() : 0,
             " ranks but the CPU group has ", cpu_group->size());
  exec_.rank = cpu_group->rank();
  exec_.size = cpu_group->size();
  exec_.cpu_group = std::move(cpu_group);
  exec_.cuda_group = std::move(cuda_group);
  thread_ = std::thread([this] { loop(); });
  set_thread_name(thread_, "loom-hvd");
}

Controller::~Controller() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<std::unique_ptr<Request>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(queue_);
    queued_names_.clear();
  }
  for (auto& r : left)
    r->state->fail("hvd: '" + r->name + "' was still waiting for the other ranks when hvd was shut down");
}

ControllerStats Controller::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string Controller::auto_name(OpKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  return to_string(kind) + ".noname." + std::to_string(++unnamed_);
}

Handle Controller::submit(std::unique_ptr<Request> request) {
  LOOM_CHECK(request && request->state, "hvd: submit needs a request with a handle state");
  request->desc.name_hash = hash_name(request->name);
  request->submitted = Clock::now();
  Handle handle(request->state);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    LOOM_CHECK(broken_.empty() && !stop_, "hvd: cannot run ", to_string(request->desc.kind), " '",
               request->name, "': ", broken_.empty() ? "hvd was shut down" : broken_);
    LOOM_CHECK(queued_names_.insert(request->name).second, "hvd: an operation named '", request->name,
               "' is already waiting to be negotiated; the names of pending operations must be unique "
               "(hvd matches tensors across ranks by name): synchronize the first one, or give this "
               "one another name");
    queue_.push_back(std::move(request));
    ++stats_.submitted;
  }
  cv_.notify_all();
  return handle;
}

int Controller::join() {
  std::unique_lock<std::mutex> lock(mutex_);
  LOOM_CHECK(broken_.empty() && !stop_, "hvd::join: ", broken_.empty() ? "hvd was shut down" : broken_);
  LOOM_CHECK(!join_requested_, "hvd::join: another thread of rank ", exec_.rank, " is already in join()");
  join_requested_ = true;
  join_first_round_ = true;
  join_done_ = false;
  cv_.notify_all();
  cv_.wait(lock, [&] { return join_done_ || !broken_.empty() || stop_; });
  if (!join_done_) {
    join_requested_ = false;
    LOOM_FAIL("hvd::join: ", broken_.empty() ? "hvd was shut down" : broken_);
  }
  join_done_ = false;
  return join_result_;
}

void Controller::stop_with(const std::string& message) {
  std::deque<std::unique_ptr<Request>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = message;
    left.swap(queue_);
    queued_names_.clear();
  }
  cv_.notify_all();
  for (auto& r : left) r->state->fail(message);
}

void Controller::loop() {
  autograd::NoGradGuard no_grad;  // packing and unpacking record no history
  Clock::time_point next_round = Clock::now();
  auto backoff = std::chrono::duration_cast<Clock::duration>(options_.cycle_time);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || join_requested_; });
      if (stop_) return;
      // The oldest request waits at least one cycle, so the requests that
      // follow it (the rest of a backward's gradients) arrive and fuse.
      Clock::time_point deadline = next_round;
      if (!queue_.empty()) deadline = std::max(deadline, queue_.front()->submitted + options_.cycle_time);
      cv_.wait_until(lock, deadline, [&] { return stop_; });
      if (stop_) return;
    }
    const Clock::time_point start = Clock::now();
    bool progress = false;
    try {
      progress = run_round();
    } catch (const std::exception& e) {
      stop_with(std::string("hvd stopped on rank ") + std::to_string(exec_.rank) +
                " after a failed negotiation round: " + e.what() +
                " (call hvd::shutdown() and hvd::init() to start again)");
      return;
    }
    const auto cycle = std::chrono::duration_cast<Clock::duration>(options_.cycle_time);
    backoff = progress ? cycle : std::min<Clock::duration>(std::max(backoff * 2, cycle), kMaxBackoff);
    next_round = start + backoff;
  }
}

bool Controller::run_round() {
  const int rank = exec_.rank, size = exec_.size;
  Record mine;
  mine.fusion_threshold = options_.fusion_threshold;
  std::vector<Request*> listed;  // this round's entries, in record order
  bool joined = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const Clock::time_point now = Clock::now();
    if (join_requested_ && queue_.empty()) {
      joined = true;
      mine.status = join_first_round_ ? RankStatus::kJoining : RankStatus::kJoined;
    } else {
      // A record holds kMaxEntries: with more queued, list first what the
      // reference rank listed last round (so ranks whose queues hold the
      // same tensors in very different orders still meet), then the oldest.
      const size_t max = Record::kMaxEntries;
      std::vector<Request*> order;
      if (queue_.size() > max && !wanted_.empty())
        for (const auto& r : queue_)
          if (wanted_.count(r->desc.name_hash)) order.push_back(r.get());
      for (const auto& r : queue_)
        if (queue_.size() <= max || !wanted_.count(r->desc.name_hash)) order.push_back(r.get());
      for (Request* r : order) {
        if (listed.size() == max) break;
        listed.push_back(r);
        mine.entries.push_back(r->desc);
      }
      for (const auto& r : queue_)
        if (options_.stall_timeout.count() > 0 && now - r->submitted > options_.stall_timeout &&
            std::find(listed.begin(), listed.end(), r.get()) != listed.end())
          mine.stalled = true;
    }
  }

  // Negotiate: every rank's record, in rank order.
  Tensor in = empty({Record::kLength}, TensorOptions(kInt64));
  mine.encode(in.data_ptr<int64_t>());
  Tensor all = empty({size * Record::kLength}, TensorOptions(kInt64));  // (size, kLength)
  exec_.cpu_group->all_gather_into_tensor(all, in)->wait();
  std::vector<Record> records;
  for (int r = 0; r < size; ++r) records.push_back(Record::decode(all.data_ptr<int64_t>() + r * Record::kLength, r));
  const Round round = plan_round(records);
  wanted_.clear();
  for (int r = 0; r < size; ++r) {
    if (records[r].status != RankStatus::kActive) continue;
    for (const Descriptor& d : records[r].entries) wanted_.insert(d.name_hash);
    break;  // the lowest active rank: the reference
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.rounds;
    stats_.fused_operations += static_cast<int64_t>(round.groups.size());
    for (const auto& group : round.groups) stats_.tensors += static_cast<int64_t>(group.size());
  }

  if (round.all_joined) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      join_requested_ = false;
      join_done_ = true;
      join_result_ = round.last_joined;
    }
    cv_.notify_all();
    return true;
  }
  if (joined) {
    std::lock_guard<std::mutex> lock(mutex_);
    join_first_round_ = false;
  }

  // Take this rank's matched requests out of the queue.
  std::vector<std::unique_ptr<Request>> taken(round.entries.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t e = 0; e < round.entries.size(); ++e) {
      const int pos = round.entries[e].position[rank];
      if (pos < 0) continue;
      Request* wanted = listed[pos];
      auto it = std::find_if(queue_.begin(), queue_.end(),
                             [&](const std::unique_ptr<Request>& q) { return q.get() == wanted; });
      if (it == queue_.end()) continue;  // cannot happen: only this thread removes
      queued_names_.erase((*it)->name);
      taken[e] = std::move(*it);
      queue_.erase(it);
    }
  }

  for (size_t e = 0; e < round.entries.size(); ++e) {
    const auto& entry = round.entries[e];
    if (entry.error.empty() || !taken[e]) continue;
    taken[e]->state->fail("hvd: ranks disagree on '" + taken[e]->name + "': " + entry.error +
                          " (every rank must submit an operation of this name with the same kind, "
                          "shape, dtype, device kind, op and root)");
  }
  for (const auto& group : round.groups) {
    std::vector<Descriptor> descs;
    std::vector<Request*> requests;
    for (size_t e : group) {
      descs.push_back(round.entries[e].desc);
      requests.push_back(taken[e].get());
    }
    try {
      execute_group(exec_, descs, requests);
    } catch (...) {
      // Issuing failed the same way on every rank (the descriptors agree),
      // so the ranks stay in step; fail this group's handles.
      for (Request* r : requests)
        if (r) r->state->fail(std::current_exception());
    }
  }

  // Requests still queued from this round's record.
  std::vector<Request*> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Request* p : listed) {
      const bool still = std::any_of(queue_.begin(), queue_.end(),
                                     [&](const std::unique_ptr<Request>& q) { return q.get() == p; });
      if (still) waiting.push_back(p);
    }
  }
  if (round.stalled && !waiting.empty()) {
    std::vector<std::unique_ptr<Request>> failed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Request* p : waiting) {
        auto it = std::find_if(queue_.begin(), queue_.end(),
                               [&](const std::unique_ptr<Request>& q) { return q.get() == p; });
        queued_names_.erase((*it)->name);
        failed.push_back(std::move(*it));
        queue_.erase(it);
      }
    }
    for (auto& r : failed) {
      const std::vector<int> missing = ranks_without(records, r->desc.name_hash);
      std::ostringstream msg;
      msg << "hvd: '" << r->name << "' (" << r->desc.describe() << ") was submitted on rank " << rank
          << " but ";
      if (missing.empty()) msg << "could not be matched with the other ranks' operations";
      else msg << "not by rank(s) " << rank_list(missing);
      msg << " within the stall timeout of " << seconds(options_.stall_timeout)
          << " s; every rank must submit the same operation names (hvd matches tensors across ranks "
             "by name), or join() when it has run out of data";
      r->state->fail(msg.str());
    }
  } else {
    warn_stalls(records, waiting);
  }
  return !round.entries.empty();
}

void Controller::warn_stalls(const std::vector<Record>& records, const std::vector<Request*>& waiting) {
  if (options_.stall_warning.count() <= 0) return;
  const Clock::time_point now = Clock::now();
  for (Request* r : waiting) {
    if (r->warned || now - r->submitted < options_.stall_warning) continue;
    r->warned = true;
    const std::vector<int> missing = ranks_without(records, r->desc.name_hash);
    std::fprintf(stderr,
                 "hvd warning (rank %d): '%s' has waited %.1f s for rank(s) %s to submit it; every rank "
                 "must submit the same operation names, or join() when it has run out of data\n",
                 exec_.rank, r->name.c_str(), seconds(now - r->submitted), rank_list(missing).c_str());
    std::fflush(stderr);
  }
}

}  // namespace horovod
}  // namespace distributed
}  // namespace loom
