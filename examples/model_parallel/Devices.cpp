#include "examples/model_parallel/Devices.h"

#include <cstdint>
#include <sstream>

#include <set>

#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"

namespace loom {
namespace examples {

namespace {
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> parts;
  std::stringstream in(list);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}
}  // namespace

std::vector<Device> parse_devices(const std::string& list, size_t count, const std::string& flag) {
  std::vector<Device> devices;
  for (const std::string& part : split_commas(list)) {
    try {
      devices.emplace_back(part);
    } catch (const Error& e) {
      LOOM_FAIL(flag, ": cannot parse device \"", part, "\" in \"", list, "\": ", e.what());
    }
  }
  LOOM_CHECK(devices.size() == count, flag, ": expected ", count,
             " comma-separated devices (e.g. cpu:0,cpu:1), got \"", list, "\"");
  return devices;
}

std::string device_name(const Device& device) {
  return device.is_cpu() ? "cpu:" + std::to_string(device.index) : device.str();
}

void synchronize_devices(const std::vector<Device>& devices) {
  std::set<int> gpus;
  for (const Device& d : devices)
    if (d.is_cuda()) gpus.insert(d.index);
  for (int gpu : gpus) cuda::synchronize(gpu);
}

std::vector<int64_t> parse_positive_list(const std::string& list, const std::string& flag) {
  std::vector<int64_t> values;
  for (const std::string& part : split_commas(list)) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LOOM_CHECK(used == part.size() && !part.empty(), flag, ": expected comma-separated integers, got \"",
               list, "\"");
    LOOM_CHECK(v >= 1, flag, ": every value must be positive, got ", v);
    values.push_back(v);
  }
  LOOM_CHECK(!values.empty(), flag, ": expected at least one value, got \"", list, "\"");
  return values;
}

}  // namespace examples
}  // namespace loom
