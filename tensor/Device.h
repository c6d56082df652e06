// Device: where a tensor's memory lives and whose thread/stream runs its ops.
//
// CPU indices are real, distinct logical devices: cpu:0 and cpu:1 each own a
// worker thread, so model parallelism and pipelines work on a CPU-only machine.
// Tensors on two devices never mix in one op; `.to(device)` moves between them.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace loom {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };

constexpr DeviceType kCPU = DeviceType::kCPU;
constexpr DeviceType kCUDA = DeviceType::kCUDA;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  Device() = default;
  Device(DeviceType type, int index = 0);
  // Parses "cpu", "cpu:1", "cuda", "cuda:0".  Throws loom::Error otherwise.
  Device(const std::string& spec);  // NOLINT: implicit like torch::Device
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  // "cpu", "cpu:1", "cuda:0": index 0 of the CPU prints as plain "cpu".
  std::string str() const;

  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool operator<(const Device& o) const {
    return type != o.type ? type < o.type : index < o.index;
  }
};

std::ostream& operator<<(std::ostream& out, const Device& device);

// Throws loom::Error unless ops can run on `device`: every CPU device can; a
// CUDA device must be visible (the message starts with `who`, names the
// index and how many devices there are, or says loom was built without CUDA).
void check_device_usable(Device device, const char* who);

}  // namespace loom

template <>
struct std::hash<loom::Device> {
  size_t operator()(const loom::Device& d) const {
    return std::hash<int>()(static_cast<int>(d.type) * 1024 + d.index);
  }
};
