// Checkpoints in the safetensors format: an 8-byte little-endian header
// length, a JSON header {"name": {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]}, "__metadata__": {...}}, then the raw
// little-endian data.  Files interchange with Python's safetensors / PyTorch.
//
// Writes are atomic: a temporary file beside the target is written, flushed
// and renamed over it, so a failed save never leaves a partial file where a
// good one was.  Loading validates the header against the file size and
// reports what is wrong with byte offsets.
#pragma once

#include <map>
#include <string>

#include "nn/Module.h"

namespace loom {
namespace nn {

using Metadata = std::map<std::string, std::string>;

// Saves named tensors (any device/layout; written as contiguous CPU data).
void save(const StateDict& tensors, const std::string& path, const Metadata& metadata = {});
// Loads every tensor of a file onto the CPU; metadata (optional) receives
// the "__metadata__" strings.
StateDict load(const std::string& path, Metadata* metadata = nullptr);

// A module's state_dict to/from a file.  load_into checks names and shapes
// against the module (see Module::load_state_dict) and lists every mismatch.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
void load_into(Module& module, const std::string& path, bool strict = true);

}  // namespace nn
}  // namespace loom
