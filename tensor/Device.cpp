#include "tensor/Device.h"

#include <cctype>

#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"

namespace loom {

Device::Device(DeviceType type, int index) : type(type), index(index) {
  LOOM_CHECK(index >= 0, "Device: index must be >= 0, got ", index);
}

Device::Device(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "cpu") {
    type = DeviceType::kCPU;
  } else if (kind == "cuda") {
    type = DeviceType::kCUDA;
  } else {
    LOOM_FAIL("Device: cannot parse \"", spec,
              "\": expected \"cpu\", \"cpu:N\", \"cuda\" or \"cuda:N\"");
  }
  if (colon == std::string::npos) return;
  const std::string digits = spec.substr(colon + 1);
  bool ok = !digits.empty() && digits.size() < 6;
  for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  LOOM_CHECK(ok, "Device: cannot parse \"", spec,
             "\": the index after ':' must be a non-negative integer");
  index = std::stoi(digits);
}

std::string Device::str() const {
  if (type == DeviceType::kCPU) return index == 0 ? "cpu" : "cpu:" + std::to_string(index);
  return "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) {
  return out << device.str();
}

void check_device_usable(Device device, const char* who) {
  if (device.type == DeviceType::kCUDA) cuda::check_device(device.index, who);
}

}  // namespace loom
