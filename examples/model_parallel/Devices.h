// Small helpers the model-parallel examples share.
#pragma once

#include <string>
#include <vector>

#include "tensor/Device.h"

namespace loom {
namespace examples {

// Parses a comma-separated device list ("cpu:0,cpu:1", "cuda:0,cuda:1").
// Throws loom::Error naming `flag` unless it holds exactly `count` devices
// that parse.
std::vector<Device> parse_devices(const std::string& list, size_t count, const std::string& flag);

// "cpu:0" where Device::str() says "cpu", so two devices' names read alike.
std::string device_name(const Device& device);

// Waits until every CUDA device in `devices` has finished the work queued on
// it (all streams; each GPU once).  CPU devices need nothing: their ops have
// run when they return, and pipelines synchronize their streams themselves.
// Call it before reading a clock.  Throws loom::Error for an unusable GPU.
void synchronize_devices(const std::vector<Device>& devices);

// Parses a comma-separated list of positive integers ("1,3,5").  Throws
// loom::Error naming `flag` for an empty list, a non-number or a value < 1.
std::vector<int64_t> parse_positive_list(const std::string& list, const std::string& flag);

}  // namespace examples
}  // namespace loom
