// What the CUDA emulator's tests share: a compile-time check that the
// emulator's CUDA headers (not an installed toolkit's) were found, gtest
// printing of cudaError_t by name, StreamGate (work that holds a stream until
// the test opens it, so "not run yet" checks need no timing), DeviceBuffer
// (cudaMalloc'ed memory filled from and read back to host vectors) and Stream
// (a non-blocking stream).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <ostream>
#include <vector>

#include "loom_emu/Stream.h"

#ifdef __CUDA_RUNTIME_H__
#error "a CUDA toolkit's cuda_runtime.h was found before the emulator's (tools/cuda/emu/include)"
#endif
#ifndef LOOM_CUDA_EMULATED
#error "the CUDA emulator's tests build against //tools/cuda/emu only"
#endif

// gtest prints CUDA errors by name ("cudaErrorNotReady (600)").
inline void PrintTo(cudaError_t error, std::ostream* os) {
  *os << cudaGetErrorName(error) << " (" << static_cast<int>(error) << ")";
}

namespace emu_test {

// Queues, on `stream`, work that waits until open() (or the gate's
// destruction): everything queued on the stream after the gate waits too.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) : state_(std::make_shared<State>()) {
    std::shared_ptr<State> state = state_;
    loom_emu::enqueue(stream, [state] {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->changed.wait(lock, [&] { return state->open; });
    });
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  ~StreamGate() { open(); }

  void open() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->open = true;
    }
    state_->changed.notify_all();
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    bool open = false;
  };
  std::shared_ptr<State> state_;
};

// `count` elements of device memory (freed at scope exit).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    void* p = nullptr;
    EXPECT_EQ(cudaSuccess, cudaMalloc(&p, count * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  T* get() const { return data_; }
  size_t size() const { return count_; }

  // Synchronous copies through pageable host memory.  They wait for the
  // current device's legacy stream only: synchronise the stream that wrote
  // the buffer before download().
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), count_);
    EXPECT_EQ(cudaSuccess,
              cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    EXPECT_EQ(cudaSuccess,
              cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// A non-blocking stream (destroyed at scope exit).
class Stream {
 public:
  Stream() { EXPECT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace emu_test
