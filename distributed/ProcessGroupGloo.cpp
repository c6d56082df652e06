// ProcessGroupGloo: construction (the TCP device, the rendezvous of the
// workers' Gloo contexts through the store, the worker threads) and
// destruction.  The state is in distributed/gloo/GlooState.h, the queue and
// the workers in gloo/Worker.cpp, the collectives in gloo/Collectives.cpp,
// send and recv in gloo/PointToPoint.cpp.
//
// Design notes:
// * SIGPIPE.  Gloo writes to sockets without MSG_NOSIGNAL, so the
//   constructor sets SIGPIPE to ignored when it still has its default
//   action, as Python does; otherwise a dead peer would kill us.
// * Transport thread.  Gloo reads every socket on one loop thread per device
//   (named loom-gloo-net) and the workers write from their own threads,
//   each holding the connection's mutex.  A write wakes the peer's loop
//   thread, and a woken thread may preempt the writer on its CPU with the
//   mutex still held; the loop thread of that rank, when its socket turns
//   readable meanwhile, fails its try_lock and spins on epoll until a
//   scheduler tick (4 ms) lets the writer finish.  On a machine whose cores
//   are all busy (two ranks on two cores) that stalled a 116 KB all-reduce
//   for 3.5-4.5 ms instead of 0.5 ms.  So the loop thread runs under
//   SCHED_BATCH (batch_transport_thread): it still gets its share of the
//   CPU, but a wake-up never preempts; it waits for the running thread to
//   block.  bench/RESULTS.md has the measurements.
#include "distributed/ProcessGroupGloo.h"

#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstdlib>

#include "distributed/CollectiveChecks.h"
#include "distributed/gloo/BatchSchedulingGuard.h"
#include "distributed/gloo/GlooState.h"
#include "distributed/gloo/GlooStore.h"
#include "tensor/ThreadName.h"

namespace loom {
namespace distributed {

namespace {

std::shared_ptr<::gloo::transport::Device> make_device(const std::string& interface_or_host,
                                                       bool batch_transport_thread) {
  ::gloo::transport::tcp::attr attr;
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
  checks::check_group("ProcessGroupGloo", store, rank, size, options_.timeout);
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
  shared_->record_bytes = std::min(shared_->small_bytes, gloo_glue::kRecordPayload);
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

}  // namespace distributed
}  // namespace loom
