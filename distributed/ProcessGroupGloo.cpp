#include "distributed/ProcessGroupGloo.h"

#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <sstream>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "distributed/CollectiveChecks.h"
#include "distributed/gloo/BatchSchedulingGuard.h"
#include "distributed/gloo/GlooStore.h"
#include "distributed/gloo/ReduceFunctions.h"
#include "tensor/CudaMemory.h"
#include "tensor/Factory.h"
#include "tensor/Stream.h"
#include "tensor/native/Copy.h"
#include "tensor/ThreadName.h"

namespace loom {
namespace distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// ---- describing collectives ------------------------------------------------------

enum class Kind : int64_t {
  AllReduce = 1,
  Broadcast,
  Reduce,
  AllGather,
  AllGatherIntoTensor,
  Gather,
  Scatter,
  ReduceScatter,
  AllToAll,
  Barrier,
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::Reduce: return "reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::AllGatherIntoTensor: return "all_gather_into_tensor";
    case Kind::Gather: return "gather";
    case Kind::Scatter: return "scatter";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::AllToAll: return "all_to_all";
    case Kind::Barrier: return "barrier";
  }
  return "unknown collective";
}

bool has_op(Kind k) {
  return k == Kind::AllReduce || k == Kind::Reduce || k == Kind::ReduceScatter;
}
bool has_root(Kind k) {
  return k == Kind::Broadcast || k == Kind::Reduce || k == Kind::Gather || k == Kind::Scatter;
}

constexpr int64_t kMagic = 0x6c6f6f6d676c6f6fLL;  // "loomgloo"
// Bytes of data every consistency-check record carries (see "Small messages"
// in the header): enough for a typical metric, loss or BatchNorm buffer
// set, small enough that the check of a large collective pays nothing
// noticeable for it.
constexpr size_t kRecordPayload = 4096;
constexpr int kNumDTypes = 6;

// What one rank says about the collective it is about to run.  Fields a
// collective does not use stay at their defaults so they compare equal.
struct Signature {
  Kind kind = Kind::Barrier;
  int64_t op = -1;
  int64_t dtype = -1;
  int64_t numel = -1;  // per-rank element count (see each collective)
  int64_t root = -1;
  std::vector<int64_t> send_counts;  // all_to_all: elements to each rank
  std::vector<int64_t> recv_counts;  // all_to_all: elements from each rank

  static constexpr size_t kFixed = 7;
  std::vector<int64_t> encode(uint64_t seq, int size) const {
    std::vector<int64_t> v(kFixed + 2 * size, -1);
    v[0] = kMagic;
    v[1] = static_cast<int64_t>(seq);
    v[2] = static_cast<int64_t>(kind);
    v[3] = op;
    v[4] = dtype;
    v[5] = numel;
    v[6] = root;
    for (size_t i = 0; i < send_counts.size(); ++i) v[kFixed + i] = send_counts[i];
    for (size_t i = 0; i < recv_counts.size(); ++i) v[kFixed + size + i] = recv_counts[i];
    return v;
  }
  static Signature decode(const int64_t* v, int size) {
    Signature s;
    s.kind = static_cast<Kind>(v[2]);
    s.op = v[3];
    s.dtype = v[4];
    s.numel = v[5];
    s.root = v[6];
    if (s.kind == Kind::AllToAll) {
      s.send_counts.assign(v + kFixed, v + kFixed + size);
      s.recv_counts.assign(v + kFixed + size, v + kFixed + 2 * size);
    }
    return s;
  }
};

std::string dtype_text(int64_t dtype) {
  if (dtype < 0 || dtype >= kNumDTypes) return "dtype#" + std::to_string(dtype);
  return dtype_name(static_cast<DType>(dtype));
}

// "all_reduce (sum) of 1024 float32" (no rank).
std::string what(const Signature& s) {
  std::ostringstream out;
  out << kind_name(s.kind);
  if (has_op(s.kind) && s.op >= 0) out << " (" << to_string(static_cast<ReduceOp>(s.op)) << ")";
  if (s.kind == Kind::AllToAll) {
    int64_t total = 0;
    for (int64_t c : s.send_counts) total += c;
    out << " of " << total << " " << dtype_text(s.dtype) << " sent";
  } else if (s.kind != Kind::Barrier) {
    out << " of " << s.numel << " " << dtype_text(s.dtype);
  }
  if (has_root(s.kind)) out << " with root " << s.root;
  return out.str();
}

std::string describe(const Signature& s, int rank, int size) {
  return what(s) + " on rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// ---- tensors -----------------------------------------------------------------------

// Argument checks shared with the nccl backend (distributed/CollectiveChecks.h).
constexpr const char* kWho = "ProcessGroupGloo";
#ifdef LOOM_WITH_CUDA
constexpr checks::Placement kPlacement = checks::Placement::kCpuOrCuda;
#else
constexpr checks::Placement kPlacement = checks::Placement::kCpuOnly;
#endif
using checks::name_at;

void check_tensor(const char* op, const Tensor& t, const std::string& name) {
  checks::check_tensor(kWho, op, t, name, kPlacement);
}
void check_root(const char* op, int root, int size) { checks::check_root(kWho, op, root, size); }
void check_same(const char* op, const Tensor& t, const std::string& name, const Tensor& ref,
                const std::string& ref_name) {
  checks::check_same(kWho, op, t, name, ref, ref_name);
}
void check_count(const char* op, const char* name, size_t got, int size) {
  checks::check_count(kWho, op, name, got, size);
}

// A CPU tensor holding t's data: t itself on the CPU; a host copy of a CUDA
// tensor (its values copied when `read`).  write_back copies a staged host
// tensor back to the device.
struct Host {
  Tensor original;
  Tensor host;
  void* ptr() const { return host.numel() ? host.data_ptr() : nullptr; }
  char* bytes() const { return static_cast<char*>(ptr()); }
  void write_back() const {
    if (!host.is_same(original)) native::copy_(original, host);
  }
};

Host to_host(const Tensor& t, bool read) {
  if (t.is_cpu()) return {t, t};
  // Pinned host memory: the device copies straight into it (no bounce buffer).
  Tensor host = cuda::pinned_empty(t.sizes(), t.dtype());
  if (read) native::copy_(host, t);
  return {t, host};
}

std::vector<Host> to_host(const std::vector<Tensor>& ts, bool read) {
  std::vector<Host> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(to_host(t, read));
  return out;
}

// The start of one buffer holding the hosts back to back, or null.
char* back_to_back(const std::vector<Host>& hosts) {
  if (hosts.empty()) return nullptr;
  char* base = hosts[0].bytes();
  if (base == nullptr) return nullptr;
  char* next = base;
  for (const auto& h : hosts) {
    if (h.bytes() != next) return nullptr;
    next += h.host.nbytes();
  }
  return base;
}

// Never hand gloo a null pointer, even for zero bytes.
char* non_null(char* p) {
  static char dummy[8];
  return p ? p : dummy;
}

milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds(1));
}

struct Mismatch : Error {
  using Error::Error;
};

}  // namespace

// ---- shared state, tasks, workers ------------------------------------------------------

struct ProcessGroupGloo::Shared {
  int rank = 0;
  int size = 1;
  milliseconds timeout{0};
  bool check = true;
  size_t small_bytes = 0;   // options.small_message_bytes rounded up to 8
  size_t record_bytes = 0;  // the check record's payload area: min(small_bytes, kRecordPayload)
  std::shared_ptr<::gloo::transport::Device> device;
  std::vector<std::shared_ptr<::gloo::Context>> contexts;

  std::mutex mutex;
  std::string broken;  // the first fatal error; empty while healthy

  std::string broken_message() {
    std::lock_guard<std::mutex> lock(mutex);
    return broken;
  }
  void set_broken(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (broken.empty()) broken = message;
  }
  // Throws when the group is broken.
  void check_healthy(const std::string& description) {
    const std::string first = broken_message();
    LOOM_CHECK(first.empty(), "ProcessGroupGloo: cannot run ", description,
               ": the group is broken by an earlier failure (", first,
               "); destroy it and create a new process group");
  }

  // Turns an exception from gloo into a loom::Error naming the operation, and
  // marks the group broken (gloo closes its connections on such errors).
  Error fatal(const std::string& description, const std::exception& e,
              Clock::time_point deadline) {
    const std::string text = e.what();
    std::string message;
    if (text.find("imeout") != std::string::npos || text.find("Timed out") != std::string::npos ||
        Clock::now() >= deadline) {
      message = "ProcessGroupGloo: " + description + " timed out after " +
                std::to_string(timeout.count()) +
                " ms (a peer may have died or skipped this collective)";
    } else {
      message = "ProcessGroupGloo: " + description +
                " failed: lost the connection to a peer (did a peer process die or destroy "
                "its process group?): " + text;
    }
    set_broken(message);
    return Error(message);
  }
};

struct ProcessGroupGloo::Task {
  Signature sig;
  std::string description;
  bool after_all = false;  // barrier: wait for every earlier collective
  std::vector<std::pair<const char*, const char*>> memory;
  // CUDA tensors: events recorded on the caller's current stream when the
  // collective was issued; the worker waits for them before it stages the
  // tensors through host memory (on its own thread's stream).
  std::vector<Event> ready;
  std::vector<WorkPtr> after;
  // Runs the collective on ctx within the deadline.
  std::function<void(const std::shared_ptr<::gloo::Context>&, uint32_t tag,
                     Clock::time_point deadline)> run;
  // The small-message path (design notes): a collective that can complete
  // from every rank's `payload_bytes` (> 0) bytes sets these.  put writes this
  // rank's bytes; take reads rank r's at gathered + r * stride.  Used instead
  // of run when payload_bytes <= Shared::small_bytes and size > 1: inside the
  // check's records when it fits their payload area (record_bytes), else as
  // an all-gather of its own after the check.
  size_t payload_bytes = 0;
  std::function<void(char* payload)> put;
  std::function<void(const char* gathered, size_t stride)> take;
  WorkPtr work;
  uint64_t seq = 0;
};

struct ProcessGroupGloo::InFlight {
  WorkPtr work;
  std::vector<std::pair<const char*, const char*>> memory;
};

struct ProcessGroupGloo::Worker {
  std::shared_ptr<::gloo::Context> context;
  std::shared_ptr<Shared> shared;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Task>> queue;
  bool stop = false;
  uint32_t next_tag = 1;  // 0 is the consistency check's

  void loop() {
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
      std::exception_ptr error;
      const auto deadline = Clock::now() + shared->timeout;
      try {
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
      } catch (const Error&) {
        error = std::current_exception();
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(shared->fatal(task->description, e, deadline));
      } catch (...) {
        error = std::make_exception_ptr(Error("ProcessGroupGloo: " + task->description +
                                              " failed with an unknown exception"));
      }
      task->work->finish(error);
    }
  }

  // Reused buffers of the exchanges (this worker's only).
  std::vector<int64_t> mine_buffer, all_buffer;

  // The small-message path without the check: one all-gather of every rank's
  // payload, then the task completes from it.
  void gather_payloads(const Task& task, uint32_t tag, Clock::time_point deadline) {
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
  // match); all compare all against rank 0 and fail with the same message
  // when they differ.  When `small`, the payload area carries the task's
  // data and the task completes from the gathered records here.
  void exchange_signatures(const Task& task, Clock::time_point deadline, bool small) {
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
    const std::vector<int64_t>& mine = sig;
    const std::vector<int64_t>& all = all_buffer;

    std::vector<Signature> sigs;
    for (int r = 0; r < size; ++r) {
      const int64_t* v = all.data() + r * record;
      LOOM_CHECK(v[0] == kMagic, "ProcessGroupGloo: ", task.description, ": rank ", r,
                 " sent a malformed collective description (is it running loom?)");
      if (v[1] != mine[1]) {
        throw Mismatch("ProcessGroupGloo: ranks are out of step: rank " + std::to_string(r) +
                       " is at collective #" + std::to_string(v[1]) + " while rank " +
                       std::to_string(shared->rank) + " is at #" + std::to_string(mine[1]) +
                       " (" + task.description +
                       "); every rank must issue the same collectives in the same order");
      }
      sigs.push_back(Signature::decode(v, size));
    }
    const Signature& ref = sigs[0];
    for (int r = 1; r < size; ++r) {
      const Signature& s = sigs[r];
      if (s.kind != ref.kind || s.op != ref.op || s.dtype != ref.dtype || s.numel != ref.numel ||
          s.root != ref.root) {
        throw Mismatch("ProcessGroupGloo: ranks disagree on collective #" +
                       std::to_string(task.seq) + ": rank 0 issued " + what(ref) + ", rank " +
                       std::to_string(r) + " issued " + what(s) +
                       " (every rank must issue the same collectives, with matching dtypes and "
                       "sizes, in the same order)");
      }
    }
    if (ref.kind == Kind::AllToAll) {
      for (int i = 0; i < size; ++i)
        for (int j = 0; j < size; ++j)
          if (sigs[i].send_counts[j] != sigs[j].recv_counts[i])
            throw Mismatch("ProcessGroupGloo: all_to_all #" + std::to_string(task.seq) +
                           ": rank " + std::to_string(i) + " sends " +
                           std::to_string(sigs[i].send_counts[j]) + " elements to rank " +
                           std::to_string(j) + " (inputs[" + std::to_string(j) +
                           "]), but rank " + std::to_string(j) + " expects " +
                           std::to_string(sigs[j].recv_counts[i]) + " (outputs[" +
                           std::to_string(i) + "])");
    }
    if (small)
      task.take(reinterpret_cast<const char*>(all_buffer.data() + sig.size()), record * 8);
  }
};

// ---- construction -----------------------------------------------------------------------

namespace {

std::shared_ptr<::gloo::transport::Device> make_device(const std::string& interface_or_host,
                                                       bool batch_transport_thread) {
  ::gloo::transport::tcp::attr attr;
  std::string source = "interface_or_host";
  const char* env_name = nullptr;
  for (const char* var : {"LOOM_GLOO_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    const char* value = std::getenv(var);
    if (value != nullptr && *value != '\0') {
      env_name = var;
      break;
    }
  }
  std::string what_used;
  if (env_name != nullptr) {
    attr.iface = std::getenv(env_name);
    what_used = std::string("network interface '") + attr.iface + "' (from " + env_name + ")";
    LOOM_CHECK(if_nametoindex(attr.iface.c_str()) != 0, "ProcessGroupGloo: ", env_name, "='",
               attr.iface, "' is not a network interface of this machine");
  } else if (!interface_or_host.empty() && if_nametoindex(interface_or_host.c_str()) != 0) {
    attr.iface = interface_or_host;
    what_used = "network interface '" + interface_or_host + "'";
  } else {
    LOOM_CHECK(!interface_or_host.empty(),
               "ProcessGroupGloo: options.interface_or_host is empty; give an interface name "
               "or an address of this machine such as 127.0.0.1");
    attr.hostname = interface_or_host;
    what_used = "host '" + interface_or_host + "'";
    // Resolve it here: gloo 0.5 can crash on a name that does not resolve.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    const int rv = getaddrinfo(interface_or_host.c_str(), nullptr, &hints, &result);
    if (result != nullptr) freeaddrinfo(result);
    LOOM_CHECK(rv == 0 && result != nullptr, "ProcessGroupGloo: options.interface_or_host '",
               interface_or_host, "' is neither a network interface nor a host name that "
               "resolves (", gai_strerror(rv), "); give an address of this machine such as "
               "127.0.0.1, or an interface name");
  }
  try {
    // The device's transport loop thread inherits this name, and the
    // scheduling policy (design notes, "Transport thread").
    ThreadNameGuard name("loom-gloo-net");
    BatchSchedulingGuard batch(batch_transport_thread);
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    LOOM_FAIL("ProcessGroupGloo: cannot open a TCP device on ", what_used, ": ", e.what(),
              " (set LOOM_GLOO_SOCKET_IFNAME to a network interface of this machine)");
  }
}

}  // namespace

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size,
                                   ProcessGroupGlooOptions options)
    : ProcessGroup(rank, size, options.timeout), options_(std::move(options)) {
  LOOM_CHECK(store != nullptr, "ProcessGroupGloo: the store is null");
  LOOM_CHECK(size >= 1, "ProcessGroupGloo: size must be >= 1, got ", size);
  LOOM_CHECK(rank >= 0 && rank < size, "ProcessGroupGloo: rank must be in [0, ", size, "), got ",
             rank);
  LOOM_CHECK(options_.timeout.count() > 0, "ProcessGroupGloo: timeout must be positive, got ",
             options_.timeout.count(), " ms");
  LOOM_CHECK(options_.threads >= 1 && options_.threads <= 64,
             "ProcessGroupGloo: threads must be in [1, 64], got ", options_.threads);

  // gloo writes to sockets without MSG_NOSIGNAL: with SIGPIPE's default
  // action, a peer that dies mid-collective would kill this process instead
  // of failing the collective.  Ignore it, as Python does at start-up (a
  // handler the program installed is left alone).
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    ::signal(SIGPIPE, SIG_IGN);

  shared_ = std::make_shared<Shared>();
  shared_->rank = rank;
  shared_->size = size;
  shared_->timeout = options_.timeout;
  shared_->check = options_.check_consistency;
  LOOM_CHECK(options_.small_message_bytes <= (size_t{16} << 20),
             "ProcessGroupGloo: small_message_bytes must be at most 16 MiB, got ",
             options_.small_message_bytes);
  shared_->small_bytes = (options_.small_message_bytes + 7) / 8 * 8;
  shared_->record_bytes = std::min(shared_->small_bytes, kRecordPayload);
  shared_->device = make_device(options_.interface_or_host, options_.batch_transport_thread);

  // Each rank counts the groups it has made on this store, so a second group
  // (same store, same ranks, e.g. after a failure) gets fresh keys.
  int64_t instance = 0;
  try {
    instance = store->add("gloo/instances/rank" + std::to_string(rank), 1);
  } catch (const std::exception& e) {
    LOOM_FAIL("ProcessGroupGloo: rank ", rank, " of ", size, " cannot use the store: ", e.what());
  }
  for (int i = 0; i < options_.threads; ++i) {
    const std::string prefix =
        "gloo/" + std::to_string(instance) + "/context" + std::to_string(i) + "/";
    try {
      auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
      context->setTimeout(options_.timeout);
      gloo_glue::GlooStore gloo_store(store, prefix);
      context->connectFullMesh(gloo_store, shared_->device);
      shared_->contexts.push_back(context);
    } catch (const std::exception& e) {
      LOOM_FAIL("ProcessGroupGloo: rank ", rank, " of ", size,
                " could not connect to its peers (it published its address under '", prefix,
                "' and waited for all ", size, " ranks to do the same, then to connect; ",
                "are all ranks started, with the same store and size?): ", e.what());
    }
  }
  for (int i = 0; i < options_.threads; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->context = shared_->contexts[i];
    worker->shared = shared_;
    Worker* w = worker.get();
    worker->thread = std::thread([w] { w->loop(); });
    set_thread_name(worker->thread, "loom-gloo-" + std::to_string(i));
    workers_.push_back(std::move(worker));
  }
}

ProcessGroupGloo::~ProcessGroupGloo() {
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->stop = true;
    }
    w->cv.notify_all();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  std::lock_guard<std::mutex> lock(p2p_mutex_);
  for (auto& t : p2p_threads_)
    if (t.first.joinable()) t.first.join();
}

bool ProcessGroupGloo::is_broken() const { return !shared_->broken_message().empty(); }

WorkPtr ProcessGroupGloo::enqueue(std::shared_ptr<Task> task) {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  task->seq = next_seq_++;
  task->description = describe(task->sig, rank_, size_);
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

// ---- collectives --------------------------------------------------------------------------

namespace {

using TaskPtr = std::shared_ptr<ProcessGroupGloo::Task>;
using ContextPtr = std::shared_ptr<::gloo::Context>;

void add_memory(ProcessGroupGloo::Task& task, const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return;
  if (t.is_cuda()) task.ready.push_back(current_stream(t.device()).record());
  const char* p = static_cast<const char*>(t.data_ptr());
  task.memory.emplace_back(p, p + t.nbytes());
}

// In-place gloo allreduce of n elements at ptr.
void gloo_allreduce(const ContextPtr& ctx, void* ptr, size_t n, DType dtype,
                    const gloo_glue::ReduceFn& fn, uint32_t tag, milliseconds timeout) {
  dispatch_dtype(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    ::gloo::AllreduceOptions opts(ctx);
    opts.setOutput(static_cast<T*>(ptr), n);
    opts.setReduceFunction(fn);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    ::gloo::allreduce(opts);
  });
}

// Copies a back-to-back buffer out to the hosts (when it was a scratch buffer)
// and the hosts back to their devices.
void unpack(const char* buffer, const std::vector<Host>& hosts) {
  if (buffer != back_to_back(hosts)) {
    for (const auto& h : hosts) {
      if (h.host.nbytes()) std::memcpy(h.ptr(), buffer, h.host.nbytes());
      buffer += h.host.nbytes();
    }
  }
  for (const auto& h : hosts) h.write_back();
}

// One buffer holding the hosts back to back: theirs when they already are,
// else `scratch`, filled with their data when `read`.
char* pack(const std::vector<Host>& hosts, std::unique_ptr<char[]>& scratch, bool read) {
  if (char* p = back_to_back(hosts)) return p;
  size_t total = 0;
  for (const auto& h : hosts) total += h.host.nbytes();
  scratch.reset(new char[std::max<size_t>(total, 1)]);
  if (read) {
    char* at = scratch.get();
    for (const auto& h : hosts) {
      if (h.host.nbytes()) std::memcpy(at, h.ptr(), h.host.nbytes());
      at += h.host.nbytes();
    }
  }
  return scratch.get();
}

}  // namespace

WorkPtr ProcessGroupGloo::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", tensor, "tensor");
  const auto fn = gloo_glue::reduce_function(tensor.dtype(), op);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::AllReduce;
  task->sig.op = static_cast<int64_t>(op);
  task->sig.dtype = static_cast<int64_t>(tensor.dtype());
  task->sig.numel = tensor.numel();
  add_memory(*task, tensor);
  const int size = size_;
  const Tensor t = tensor;
  task->run = [t, fn, op, size](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0 || size == 1) return;
    const Host h = to_host(t, true);
    gloo_allreduce(ctx, h.ptr(), n, t.dtype(), fn, tag, remaining(deadline));
    if (op == ReduceOp::Avg) gloo_glue::divide_in_place(h.ptr(), t.dtype(), n, size);
    h.write_back();
  };
  // Small: every rank folds the gathered values in rank order (the same
  // result, bit for bit, on every rank).
  task->payload_bytes = t.nbytes();
  auto host = std::make_shared<Host>();
  task->put = [t, host](char* payload) {
    *host = to_host(t, true);
    std::memcpy(payload, host->bytes(), t.nbytes());
  };
  task->take = [t, host, fn, op, size](const char* gathered, size_t stride) {
    const size_t n = static_cast<size_t>(t.numel());
    char* out = host->bytes();
    std::memcpy(out, gathered, t.nbytes());
    for (int r = 1; r < size; ++r) fn(out, out, gathered + r * stride, n);
    if (op == ReduceOp::Avg) gloo_glue::divide_in_place(out, t.dtype(), n, size);
    host->write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::broadcast(Tensor& tensor, int root) {
  check_tensor("broadcast", tensor, "tensor");
  check_root("broadcast", root, size_);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::Broadcast;
  task->sig.dtype = static_cast<int64_t>(tensor.dtype());
  task->sig.numel = tensor.numel();
  task->sig.root = root;
  add_memory(*task, tensor);
  const bool is_root = rank_ == root;
  const Tensor t = tensor;
  task->run = [t, root, is_root, size = size_](const ContextPtr& ctx, uint32_t tag,
                                               Clock::time_point deadline) {
    if (t.numel() == 0 || size == 1) return;
    const Host h = to_host(t, is_root);
    ::gloo::BroadcastOptions opts(ctx);
    opts.setOutput(h.bytes(), h.host.nbytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::broadcast(opts);
    if (!is_root) h.write_back();
  };
  task->payload_bytes = t.nbytes();
  task->put = [t, is_root](char* payload) {
    if (is_root) std::memcpy(payload, to_host(t, true).bytes(), t.nbytes());
  };
  task->take = [t, is_root, root](const char* gathered, size_t stride) {
    if (is_root) return;
    const Host h = to_host(t, false);
    std::memcpy(h.bytes(), gathered + root * stride, t.nbytes());
    h.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::reduce(Tensor& tensor, int root, ReduceOp op) {
  check_tensor("reduce", tensor, "tensor");
  check_root("reduce", root, size_);
  const auto fn = gloo_glue::reduce_function(tensor.dtype(), op);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::Reduce;
  task->sig.op = static_cast<int64_t>(op);
  task->sig.dtype = static_cast<int64_t>(tensor.dtype());
  task->sig.numel = tensor.numel();
  task->sig.root = root;
  add_memory(*task, tensor);
  const bool is_root = rank_ == root;
  const Tensor t = tensor;
  task->run = [t, fn, op, root, is_root, size = size_](const ContextPtr& ctx, uint32_t tag,
                                                       Clock::time_point deadline) {
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0 || size == 1) return;
    const Host h = to_host(t, true);
    // gloo uses the output as its accumulator on every rank: off the root it
    // is scratch, so the caller's tensor stays as it was.
    std::unique_ptr<char[]> scratch;
    if (!is_root) scratch.reset(new char[h.host.nbytes()]);
    dispatch_dtype(t.dtype(), [&](auto type) {
      using T = typename decltype(type)::type;
      ::gloo::ReduceOptions opts(ctx);
      if (is_root) {
        opts.setOutput(static_cast<T*>(h.ptr()), n);
      } else {
        opts.setInput(static_cast<T*>(h.ptr()), n);
        opts.setOutput(reinterpret_cast<T*>(scratch.get()), n);
      }
      opts.setRoot(root);
      opts.setReduceFunction(fn);
      opts.setTag(tag);
      opts.setTimeout(remaining(deadline));
      ::gloo::reduce(opts);
    });
    if (is_root) {
      if (op == ReduceOp::Avg) gloo_glue::divide_in_place(h.ptr(), t.dtype(), n, size);
      h.write_back();
    }
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor("all_gather", input, "input");
  check_count("all_gather", "outputs", outputs.size(), size_);
  for (size_t r = 0; r < outputs.size(); ++r) {
    check_tensor("all_gather", outputs[r], name_at("outputs", r));
    check_same("all_gather", outputs[r], name_at("outputs", r), input, "input");
  }
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::AllGather;
  task->sig.dtype = static_cast<int64_t>(input.dtype());
  task->sig.numel = input.numel();
  add_memory(*task, input);
  for (const auto& o : outputs) add_memory(*task, o);
  const Tensor in_t = input;
  const std::vector<Tensor> outs_t = outputs;
  task->run = [in_t, outs_t](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t nb = in_t.nbytes();
    if (nb == 0) return;
    const Host in = to_host(in_t, true);
    const auto outs = to_host(outs_t, false);
    std::unique_ptr<char[]> scratch;
    char* out = pack(outs, scratch, false);
    ::gloo::AllgatherOptions opts(ctx);
    opts.setInput(in.bytes(), nb);
    opts.setOutput(out, nb * outs.size());
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::allgather(opts);
    unpack(out, outs);
  };
  task->payload_bytes = in_t.nbytes();
  task->put = [in_t](char* payload) {
    std::memcpy(payload, to_host(in_t, true).bytes(), in_t.nbytes());
  };
  task->take = [in_t, outs_t](const char* gathered, size_t stride) {
    for (size_t r = 0; r < outs_t.size(); ++r) {
      const Host h = to_host(outs_t[r], false);
      std::memcpy(h.bytes(), gathered + r * stride, in_t.nbytes());
      h.write_back();
    }
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::all_gather_into_tensor(Tensor& output, const Tensor& input) {
  check_tensor("all_gather_into_tensor", input, "input");
  check_tensor("all_gather_into_tensor", output, "output");
  checks::check_all_gather_into_tensor(kWho, output, input, size_);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::AllGatherIntoTensor;
  task->sig.dtype = static_cast<int64_t>(input.dtype());
  task->sig.numel = input.numel();
  add_memory(*task, input);
  add_memory(*task, output);
  const Tensor in_t = input;
  const Tensor out_t = output;
  task->run = [in_t, out_t](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t nb = in_t.nbytes();
    if (nb == 0) return;
    const Host in = to_host(in_t, true);
    const Host out = to_host(out_t, false);
    ::gloo::AllgatherOptions opts(ctx);
    opts.setInput(in.bytes(), nb);
    opts.setOutput(out.bytes(), out.host.nbytes());
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::allgather(opts);
    out.write_back();
  };
  task->payload_bytes = in_t.nbytes();
  task->put = [in_t](char* payload) {
    std::memcpy(payload, to_host(in_t, true).bytes(), in_t.nbytes());
  };
  task->take = [in_t, out_t](const char* gathered, size_t stride) {
    const Host out = to_host(out_t, false);
    const size_t nb = in_t.nbytes();
    for (size_t r = 0; r * nb < out.host.nbytes(); ++r)
      std::memcpy(out.bytes() + r * nb, gathered + r * stride, nb);
    out.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::gather(std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_tensor("gather", input, "input");
  check_root("gather", root, size_);
  const bool is_root = rank_ == root;
  if (is_root) {
    check_count("gather", "outputs on the root", outputs.size(), size_);
    for (size_t r = 0; r < outputs.size(); ++r) {
      check_tensor("gather", outputs[r], name_at("outputs", r));
      check_same("gather", outputs[r], name_at("outputs", r), input, "input");
    }
  }
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::Gather;
  task->sig.dtype = static_cast<int64_t>(input.dtype());
  task->sig.numel = input.numel();
  task->sig.root = root;
  add_memory(*task, input);
  std::vector<Tensor> outs_t;
  if (is_root) outs_t = outputs;
  for (const auto& o : outs_t) add_memory(*task, o);
  const Tensor in_t = input;
  task->run = [in_t, outs_t, root, is_root, size = size_](
                  const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t nb = in_t.nbytes();
    if (nb == 0) return;
    const Host in = to_host(in_t, true);
    const auto outs = to_host(outs_t, false);
    std::unique_ptr<char[]> scratch;
    char* out = is_root ? pack(outs, scratch, false) : nullptr;
    ::gloo::GatherOptions opts(ctx);
    opts.setInput(in.bytes(), nb);
    if (is_root) opts.setOutput(out, nb * size);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::gather(opts);
    if (is_root) unpack(out, outs);
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_tensor("scatter", output, "output");
  check_root("scatter", root, size_);
  const bool is_root = rank_ == root;
  if (is_root) {
    check_count("scatter", "inputs on the root", inputs.size(), size_);
    for (size_t r = 0; r < inputs.size(); ++r) {
      check_tensor("scatter", inputs[r], name_at("inputs", r));
      check_same("scatter", inputs[r], name_at("inputs", r), output, "output");
    }
  }
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::Scatter;
  task->sig.dtype = static_cast<int64_t>(output.dtype());
  task->sig.numel = output.numel();
  task->sig.root = root;
  add_memory(*task, output);
  std::vector<Tensor> ins_t;
  if (is_root) ins_t = inputs;
  for (const auto& i : ins_t) add_memory(*task, i);
  const Tensor out_t = output;
  task->run = [out_t, ins_t, root, is_root](const ContextPtr& ctx, uint32_t tag,
                                            Clock::time_point deadline) {
    const size_t nb = out_t.nbytes();
    if (nb == 0) return;
    const Host out = to_host(out_t, false);
    const auto ins = to_host(ins_t, true);
    ::gloo::ScatterOptions opts(ctx);
    if (is_root) {
      std::vector<char*> ptrs;
      for (const auto& h : ins) ptrs.push_back(h.bytes());
      opts.setInputs(ptrs, nb);
    }
    opts.setOutput(out.bytes(), nb);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::scatter(opts);
    out.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                         ReduceOp op) {
  check_tensor("reduce_scatter", output, "output");
  check_count("reduce_scatter", "inputs", inputs.size(), size_);
  for (size_t r = 0; r < inputs.size(); ++r) {
    check_tensor("reduce_scatter", inputs[r], name_at("inputs", r));
    check_same("reduce_scatter", inputs[r], name_at("inputs", r), output, "output");
  }
  const auto fn = gloo_glue::reduce_function(output.dtype(), op);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::ReduceScatter;
  task->sig.op = static_cast<int64_t>(op);
  task->sig.dtype = static_cast<int64_t>(output.dtype());
  task->sig.numel = output.numel();
  add_memory(*task, output);
  for (const auto& i : inputs) add_memory(*task, i);
  const Tensor out_t = output;
  const std::vector<Tensor> ins_t = inputs;
  task->run = [out_t, ins_t, fn, op, rank = rank_, size = size_](
                  const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const size_t n = static_cast<size_t>(out_t.numel());
    const size_t nb = out_t.nbytes();
    if (n == 0) return;
    const Host out = to_host(out_t, false);
    const auto ins = to_host(ins_t, true);
    // All-reduce of the inputs concatenated (a copy, so the inputs stay as
    // they were), then this rank's chunk.
    std::unique_ptr<char[]> scratch(new char[nb * size]);
    for (int r = 0; r < size; ++r) std::memcpy(scratch.get() + r * nb, ins[r].ptr(), nb);
    if (size > 1)
      gloo_allreduce(ctx, scratch.get(), n * size, out_t.dtype(), fn, tag, remaining(deadline));
    std::memcpy(out.ptr(), scratch.get() + rank * nb, nb);
    if (op == ReduceOp::Avg) gloo_glue::divide_in_place(out.ptr(), out_t.dtype(), n, size);
    out.write_back();
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::all_to_all(std::vector<Tensor>& outputs,
                                     const std::vector<Tensor>& inputs) {
  check_count("all_to_all", "inputs", inputs.size(), size_);
  check_count("all_to_all", "outputs", outputs.size(), size_);
  for (int r = 0; r < size_; ++r) {
    check_tensor("all_to_all", inputs[r], name_at("inputs", r));
    check_tensor("all_to_all", outputs[r], name_at("outputs", r));
  }
  checks::check_all_to_all(kWho, outputs, inputs, rank_);
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::AllToAll;
  task->sig.dtype = static_cast<int64_t>(inputs[0].dtype());
  for (int r = 0; r < size_; ++r) {
    task->sig.send_counts.push_back(inputs[r].numel());
    task->sig.recv_counts.push_back(outputs[r].numel());
    add_memory(*task, inputs[r]);
    add_memory(*task, outputs[r]);
  }
  const std::vector<Tensor> ins_t = inputs;
  const std::vector<Tensor> outs_t = outputs;
  task->run = [ins_t, outs_t](const ContextPtr& ctx, uint32_t tag, Clock::time_point deadline) {
    const auto ins = to_host(ins_t, true);
    const auto outs = to_host(outs_t, false);
    std::unique_ptr<char[]> in_scratch, out_scratch;
    char* in = pack(ins, in_scratch, true);
    char* out = pack(outs, out_scratch, false);
    std::vector<int64_t> in_bytes, out_bytes;
    for (const auto& h : ins) in_bytes.push_back(static_cast<int64_t>(h.host.nbytes()));
    for (const auto& h : outs) out_bytes.push_back(static_cast<int64_t>(h.host.nbytes()));
    ::gloo::AlltoallvOptions opts(ctx);
    opts.setInput(non_null(in), in_bytes);
    opts.setOutput(non_null(out), out_bytes);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::alltoallv(opts);
    unpack(out, outs);
  };
  return enqueue(task);
}

WorkPtr ProcessGroupGloo::barrier() {
  auto task = std::make_shared<Task>();
  task->sig.kind = Kind::Barrier;
  task->after_all = true;
  const bool checked = options_.check_consistency;
  task->run = [checked, size = size_](const ContextPtr& ctx, uint32_t tag,
                                      Clock::time_point deadline) {
    // With the consistency check on, its exchange already was a barrier.
    if (checked || size == 1) return;
    ::gloo::BarrierOptions opts(ctx);
    opts.setTag(tag);
    opts.setTimeout(remaining(deadline));
    ::gloo::barrier(opts);
  };
  return enqueue(task);
}

// ---- point to point ------------------------------------------------------------------------

namespace {

constexpr uint8_t kHeaderSlotPrefix = 0x40;
constexpr uint8_t kDataSlotPrefix = 0x41;

// One send or recv in flight: a header (magic, dtype, numel) then the data.
struct P2P {
  int64_t header[3] = {0, 0, 0};
  Host host;
  std::unique_ptr<::gloo::transport::UnboundBuffer> header_buf;
  std::unique_ptr<::gloo::transport::UnboundBuffer> data_buf;
  std::unique_ptr<char[]> drain;
};

void check_peer(const char* op, const char* name, int peer, int rank, int size, int tag) {
  checks::check_peer(kWho, op, name, peer, rank, size, tag);
}

// Waits for buf's send or recv; false when the wait was aborted.
void wait_buffer(::gloo::transport::UnboundBuffer& buf, bool send, Clock::time_point deadline,
                 const std::string& description) {
  const bool done = send ? buf.waitSend(remaining(deadline)) : buf.waitRecv(remaining(deadline));
  LOOM_CHECK(done, "ProcessGroupGloo: ", description,
             " was abandoned because its process group was destroyed");
}

}  // namespace

WorkPtr ProcessGroupGloo::send(const Tensor& tensor, int dst, int tag) {
  check_tensor("send", tensor, "tensor");
  check_peer("send", "dst", dst, rank_, size_, tag);
  const std::string description = "send of " + std::to_string(tensor.numel()) + " " +
                                  dtype_name(tensor.dtype()) + " to rank " + std::to_string(dst) +
                                  " with tag " + std::to_string(tag) + " on rank " +
                                  std::to_string(rank_) + " of " + std::to_string(size_);
  auto work = std::make_shared<Work>(description);
  auto shared = shared_;
  const auto deadline = Clock::now() + shared->timeout;
  auto op = std::make_shared<P2P>();
  try {
    shared->check_healthy(description);
    op->header[0] = kMagic;
    op->header[1] = static_cast<int64_t>(tensor.dtype());
    op->header[2] = tensor.numel();
    op->host = to_host(tensor, true);
    const auto& ctx = shared->contexts[0];
    op->header_buf = ctx->createUnboundBuffer(op->header, sizeof(op->header));
    op->header_buf->send(dst, ::gloo::Slot::build(kHeaderSlotPrefix, static_cast<uint32_t>(tag)));
    if (tensor.nbytes() > 0) {
      op->data_buf = ctx->createUnboundBuffer(op->host.ptr(), tensor.nbytes());
      op->data_buf->send(dst, ::gloo::Slot::build(kDataSlotPrefix, static_cast<uint32_t>(tag)));
    }
  } catch (const Error&) {
    work->finish(std::current_exception());
    return work;
  } catch (const std::exception& e) {
    work->finish(std::make_exception_ptr(shared->fatal(description, e, deadline)));
    return work;
  }
  spawn_p2p([op, work, shared, description, deadline] {
    std::exception_ptr error;
    try {
      wait_buffer(*op->header_buf, true, deadline, description);
      if (op->data_buf) wait_buffer(*op->data_buf, true, deadline, description);
    } catch (const Error&) {
      error = std::current_exception();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(shared->fatal(description, e, deadline));
    }
    work->finish(error);
  });
  return work;
}

WorkPtr ProcessGroupGloo::recv(Tensor& tensor, int src, int tag) {
  check_tensor("recv", tensor, "tensor");
  check_peer("recv", "src", src, rank_, size_, tag);
  const std::string description = "recv of " + std::to_string(tensor.numel()) + " " +
                                  dtype_name(tensor.dtype()) + " from rank " +
                                  std::to_string(src) + " with tag " + std::to_string(tag) +
                                  " on rank " + std::to_string(rank_) + " of " +
                                  std::to_string(size_);
  auto work = std::make_shared<Work>(description);
  auto shared = shared_;
  const auto deadline = Clock::now() + shared->timeout;
  auto op = std::make_shared<P2P>();
  try {
    shared->check_healthy(description);
    op->header_buf = shared->contexts[0]->createUnboundBuffer(op->header, sizeof(op->header));
    op->header_buf->recv(src, ::gloo::Slot::build(kHeaderSlotPrefix, static_cast<uint32_t>(tag)));
  } catch (const Error&) {
    work->finish(std::current_exception());
    return work;
  } catch (const std::exception& e) {
    work->finish(std::make_exception_ptr(shared->fatal(description, e, deadline)));
    return work;
  }
  const Tensor t = tensor;
  spawn_p2p([op, work, shared, description, deadline, t, src, tag] {
    std::exception_ptr error;
    try {
      const auto& ctx = shared->contexts[0];
      const auto data_slot = ::gloo::Slot::build(kDataSlotPrefix, static_cast<uint32_t>(tag));
      wait_buffer(*op->header_buf, false, deadline, description);
      const int64_t dtype = op->header[1];
      const int64_t numel = op->header[2];
      if (op->header[0] != kMagic || dtype < 0 || dtype >= kNumDTypes || numel < 0) {
        const std::string message = "ProcessGroupGloo: " + description + ": rank " +
                                    std::to_string(src) +
                                    " sent a malformed message header (is it running loom?)";
        shared->set_broken(message);
        throw Error(message);
      }
      if (dtype == static_cast<int64_t>(t.dtype()) && numel == t.numel()) {
        if (t.nbytes() > 0) {
          op->host = to_host(t, false);
          op->data_buf = ctx->createUnboundBuffer(op->host.ptr(), t.nbytes());
          op->data_buf->recv(src, data_slot);
          wait_buffer(*op->data_buf, false, deadline, description);
          op->host.write_back();
        }
      } else {
        // Take the data (so the sender completes) and report the mismatch.
        const size_t bytes = static_cast<size_t>(numel) * element_size(static_cast<DType>(dtype));
        if (bytes > 0) {
          op->drain.reset(new char[bytes]);
          op->data_buf = ctx->createUnboundBuffer(op->drain.get(), bytes);
          op->data_buf->recv(src, data_slot);
          wait_buffer(*op->data_buf, false, deadline, description);
        }
        throw Error("ProcessGroupGloo: " + description + ": rank " + std::to_string(src) +
                    " sent " + std::to_string(numel) + " " + dtype_text(dtype) +
                    " with this tag, which does not match the tensor to receive into (" +
                    t.describe() + "); the message was discarded");
      }
    } catch (const Error&) {
      error = std::current_exception();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(shared->fatal(description, e, deadline));
    }
    work->finish(error);
  });
  return work;
}

void ProcessGroupGloo::spawn_p2p(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(p2p_mutex_);
  for (auto it = p2p_threads_.begin(); it != p2p_threads_.end();) {
    if (it->second->load()) {
      it->first.join();
      it = p2p_threads_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread([fn = std::move(fn), done] {
    fn();
    done->store(true);
  });
  p2p_threads_.emplace_back(std::move(thread), done);
}

}  // namespace distributed
}  // namespace loom
