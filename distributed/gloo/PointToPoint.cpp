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

}  // namespace

WorkPtr ProcessGroupGloo::send(const Tensor& tensor, int dst, int tag) {
  checks::check_tensor(kWho, "send", tensor, "tensor", kPlacement);
  checks::check_peer(kWho, "send", "dst", dst, rank_, size_, tag);
  auto transfer = std::make_shared<Transfer>(
      checks::describe_transfer("send", tensor, "to", dst, tag, rank_, size_), shared_);
  Transfer& x = *transfer;
  const bool posted = x.post([&] {
    x.header[0] = kMagic;
    x.header[1] = static_cast<int64_t>(tensor.dtype());
    x.header[2] = tensor.numel();
    x.host = to_host(tensor, true);
    x.header_buf = x.buffer(x.header, sizeof(x.header));
    x.header_buf->send(dst, slot(kHeaderSlotPrefix, tag));
    if (tensor.nbytes() > 0) {
      x.data_buf = x.buffer(x.host.ptr(), tensor.nbytes());
      x.data_buf->send(dst, slot(kDataSlotPrefix, tag));
    }
  });
  if (!posted) return transfer->work;
  spawn_p2p([transfer] {
    Transfer& x = *transfer;
    x.complete([&] {
      x.wait(*x.header_buf, true);
      if (x.data_buf) x.wait(*x.data_buf, true);
    });
  });
  return transfer->work;
}

WorkPtr ProcessGroupGloo::recv(Tensor& tensor, int src, int tag) {
  checks::check_tensor(kWho, "recv", tensor, "tensor", kPlacement);
  checks::check_peer(kWho, "recv", "src", src, rank_, size_, tag);
  auto transfer = std::make_shared<Transfer>(
      checks::describe_transfer("recv", tensor, "from", src, tag, rank_, size_), shared_);
  Transfer& x = *transfer;
  const bool posted = x.post([&] {
    x.header_buf = x.buffer(x.header, sizeof(x.header));
    x.header_buf->recv(src, slot(kHeaderSlotPrefix, tag));
  });
  if (!posted) return transfer->work;
  const Tensor t = tensor;
  spawn_p2p([transfer, t, src, tag] {
    Transfer& x = *transfer;
    x.complete([&] {
      x.wait(*x.header_buf, false);
      const int64_t dtype = x.header[1];
      const int64_t numel = x.header[2];
      if (x.header[0] != kMagic || dtype < 0 || dtype >= kNumDTypes || numel < 0) {
        const std::string message = "ProcessGroupGloo: " + x.description + ": rank " +
                                    std::to_string(src) +
                                    " sent a malformed message header (is it running loom?)";
        x.shared->set_broken(message);
        throw Error(message);
      }
      if (dtype == static_cast<int64_t>(t.dtype()) && numel == t.numel()) {
        if (t.nbytes() > 0) {
          x.host = to_host(t, false);
          x.data_buf = x.buffer(x.host.ptr(), t.nbytes());
          x.data_buf->recv(src, slot(kDataSlotPrefix, tag));
          x.wait(*x.data_buf, false);
          x.host.write_back();
        }
      } else {
        // Take the data (so the sender completes) and report the mismatch.
        const size_t bytes = static_cast<size_t>(numel) * element_size(static_cast<DType>(dtype));
        if (bytes > 0) {
          x.drain.reset(new char[bytes]);
          x.data_buf = x.buffer(x.drain.get(), bytes);
          x.data_buf->recv(src, slot(kDataSlotPrefix, tag));
          x.wait(*x.data_buf, false);
        }
        throw Error("ProcessGroupGloo: " + x.description + ": rank " + std::to_string(src) +
                    " sent " + std::to_string(numel) + " " + dtype_text(dtype) +
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
