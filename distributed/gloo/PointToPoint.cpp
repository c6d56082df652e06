// ProcessGroupGloo's point-to-point operations, send and recv.  The state is
// in distributed/gloo/GlooState.h.
//
// Design note (point to point).  send/recv bypass the workers: the send is
// posted at once on the first context (it completes once the receiver has
// taken the data), a recv is driven by a helper thread (spawn_p2p); a small
// header (magic, dtype, numel) travels first so that a size or dtype
// mismatch is a loom::Error on the receiver (the data is drained), not an
// abort.  Messages between two ranks with the same tag arrive in order.
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "distributed/gloo/GlooState.h"
#include "distributed/gloo/HostStaging.h"

namespace loom {
namespace distributed {

using namespace gloo_glue;

namespace {

constexpr uint8_t kHeaderSlotPrefix = 0x40;
constexpr uint8_t kDataSlotPrefix = 0x41;

// The gloo slot of a message's header or data with this tag.
uint64_t slot(uint8_t prefix, int tag) {
  return ::gloo::Slot::build(prefix, static_cast<uint32_t>(tag));
}

// One send or recv: its Work, the group's state, its deadline, and the
// header and data in flight.  post() runs in the calling thread and starts
// the transfer; complete() runs on a helper thread and waits for it.  Either
// finishes the Work with what failed (Shared::capture).
struct Transfer {
  std::string description;
  WorkPtr work;
  std::shared_ptr<ProcessGroupGloo::Shared> shared;
  Clock::time_point deadline;
  int64_t header[3] = {0, 0, 0};  // kMagic, dtype, numel
  Host host;
  std::unique_ptr<::gloo::transport::UnboundBuffer> header_buf;
  std::unique_ptr<::gloo::transport::UnboundBuffer> data_buf;
  std::unique_ptr<char[]> drain;

  Transfer(std::string what, std::shared_ptr<ProcessGroupGloo::Shared> state)
      : description(std::move(what)),
        work(std::make_shared<Work>(description)),
        shared(std::move(state)),
        deadline(Clock::now() + shared->timeout) {}

  // Runs fn once the group is known healthy; false (the Work finished with
  // the error) when either fails.
  template <typename Fn>
  bool post(Fn&& fn) {
    const std::exception_ptr error = shared->capture(description, deadline, [&] {
      shared->check_healthy(description);
      fn();
    });
    if (error) work->finish(error);
    return !error;
  }
  template <typename Fn>
  void complete(Fn&& fn) {
    work->finish(shared->capture(description, deadline, fn));
  }

  // An unbound buffer over n bytes at data, on the first context.
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer(void* data, size_t n) const {
    return shared->contexts[0]->createUnboundBuffer(data, n);
  }

  // Waits for buf's send or recv; throws when the wait was aborted.
  void wait(::gloo::transport::UnboundBuffer& buf, bool send) const {
    const bool done =
        send ? buf.waitSend(remaining(deadline)) : buf.waitRecv(remaining(deadline));
    LOOM_CHECK(done, "ProcessGroupGloo: ", description,
               " was abandoned because its process group was destroyed");
  }
};

// Checks the arguments of a send (peer_name "dst", direction "to") or a recv
// ("src", "from") and makes its Transfer.
std::shared_ptr<Transfer> new_transfer(std::shared_ptr<ProcessGroupGloo::Shared> shared,
                                       const char* op, const char* peer_name,
                                       const char* direction, const Tensor& tensor, int peer,
                                       int tag) {
  checks::check_tensor(kWho, op, tensor, "tensor", kPlacement);
  checks::check_peer(kWho, op, peer_name, peer, shared->rank, shared->size, tag);
  std::string description =
      checks::describe_transfer(op, tensor, direction, peer, tag, shared->rank, shared->size);
  return std::make_shared<Transfer>(std::move(description), std::move(shared));
}

}  // namespace

WorkPtr ProcessGroupGloo::send(const Tensor& tensor, int dst, int tag) {
  auto transfer = new_transfer(shared_, "send", "dst", "to", tensor, dst, tag);
  const bool posted = transfer->post([&] {
    transfer->header[0] = kMagic;
    transfer->header[1] = static_cast<int64_t>(tensor.dtype());
    transfer->header[2] = tensor.numel();
    transfer->host = to_host(tensor, true);
    transfer->header_buf = transfer->buffer(transfer->header, sizeof(transfer->header));
    transfer->header_buf->send(dst, slot(kHeaderSlotPrefix, tag));
    if (tensor.nbytes() > 0) {
      transfer->data_buf = transfer->buffer(transfer->host.ptr(), tensor.nbytes());
      transfer->data_buf->send(dst, slot(kDataSlotPrefix, tag));
    }
  });
  if (!posted) return transfer->work;
  spawn_p2p([transfer] {
    transfer->complete([&] {
      transfer->wait(*transfer->header_buf, true);
      if (transfer->data_buf) transfer->wait(*transfer->data_buf, true);
    });
  });
  return transfer->work;
}

WorkPtr ProcessGroupGloo::recv(Tensor& tensor, int src, int tag) {
  auto transfer = new_transfer(shared_, "recv", "src", "from", tensor, src, tag);
  const bool posted = transfer->post([&] {
    transfer->header_buf = transfer->buffer(transfer->header, sizeof(transfer->header));
    transfer->header_buf->recv(src, slot(kHeaderSlotPrefix, tag));
  });
  if (!posted) return transfer->work;
  const Tensor t = tensor;
  spawn_p2p([transfer, t, src, tag] {
    transfer->complete([&] {
      transfer->wait(*transfer->header_buf, false);
      const int64_t dtype = transfer->header[1];
      const int64_t numel = transfer->header[2];
      if (transfer->header[0] != kMagic || dtype < 0 || dtype >= kNumDTypes || numel < 0) {
        const std::string message = "ProcessGroupGloo: " + transfer->description + ": rank " +
                                    std::to_string(src) +
                                    " sent a malformed message header (is it running loom?)";
        transfer->shared->set_broken(message);
        throw Error(message);
      }
      if (dtype == static_cast<int64_t>(t.dtype()) && numel == t.numel()) {
        if (t.nbytes() > 0) {
          transfer->host = to_host(t, false);
          transfer->data_buf = transfer->buffer(transfer->host.ptr(), t.nbytes());
          transfer->data_buf->recv(src, slot(kDataSlotPrefix, tag));
          transfer->wait(*transfer->data_buf, false);
          transfer->host.write_back();
        }
      } else {
        // Take the data (so the sender completes) and report the mismatch.
        const size_t bytes = static_cast<size_t>(numel) * element_size(static_cast<DType>(dtype));
        if (bytes > 0) {
          transfer->drain.reset(new char[bytes]);
          transfer->data_buf = transfer->buffer(transfer->drain.get(), bytes);
          transfer->data_buf->recv(src, slot(kDataSlotPrefix, tag));
          transfer->wait(*transfer->data_buf, false);
        }
        throw Error("ProcessGroupGloo: " + transfer->description + ": rank " +
                    std::to_string(src) + " sent " + std::to_string(numel) + " " +
                    dtype_text(dtype) +
                    " with this tag, which does not match the tensor to receive into (" +
                    t.describe() + "); the message was discarded");
      }
    });
  });
  return transfer->work;
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
