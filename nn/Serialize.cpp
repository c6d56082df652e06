#include "nn/Serialize.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/Factory.h"
#include "tensor/ShapeUtil.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace nn {
namespace {

using json = nlohmann::json;

const char* safetensors_dtype(DType d) {
  switch (d) {
    case kFloat32: return "F32";
    case kFloat64: return "F64";
    case kInt64: return "I64";
    case kInt32: return "I32";
    case kUInt8: return "U8";
    case kBool: return "BOOL";
    case kFloat16: return "F16";
    case kBFloat16: return "BF16";
  }
  return "?";
}

DType parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return kFloat32;
  if (s == "F64") return kFloat64;
  if (s == "I64") return kInt64;
  if (s == "I32") return kInt32;
  if (s == "U8") return kUInt8;
  if (s == "BOOL") return kBool;
  if (s == "F16") return kFloat16;
  if (s == "BF16") return kBFloat16;
  LOOM_FAIL("load: ", path, ": tensor \"", name, "\" has dtype ", s,
            " which loom does not support (F32, F64, F16, BF16, I64, I32, U8, BOOL)");
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void save(const StateDict& tensors, const std::string& path, const Metadata& metadata) {
  json header = json::object();
  std::vector<Tensor> blobs;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    LOOM_CHECK(t.defined(), "save: tensor \"", name, "\" is undefined");
    LOOM_CHECK(name != "__metadata__", "save: \"__metadata__\" is reserved");
    Tensor host = native::contiguous(native::to(t, Device(kCPU), t.dtype()));
    const uint64_t n = host.nbytes();
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", t.sizes()},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
    blobs.push_back(host);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keeps the data 8-byte aligned
  const uint64_t header_len = text.size();

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LOOM_CHECK(out.good(), "save: cannot write ", tmp, ": ", errno_text());
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(header_len >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Tensor& b : blobs)
      if (b.nbytes() > 0) out.write(static_cast<const char*>(b.data_ptr()), static_cast<std::streamsize>(b.nbytes()));
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      LOOM_FAIL("save: writing ", tmp, " failed: ", errno_text());
    }
  }
  // Make the bytes durable before the rename publishes them.
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    std::remove(tmp.c_str());
    LOOM_FAIL("save: cannot move ", tmp, " to ", path, ": ", why);
  }
}

StateDict load(const std::string& path, Metadata* metadata) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  LOOM_CHECK(in.good(), "load: cannot open ", path, ": ", errno_text());
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  LOOM_CHECK(file_size >= 8, "load: ", path, ": file is ", file_size,
             " bytes, too short for a safetensors header (8 bytes)");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len[i]) << (8 * i);
  LOOM_CHECK(header_len <= file_size - 8, "load: ", path, ": header length ", header_len,
             " exceeds the file size (", file_size, " bytes); the file is truncated or not a "
             "safetensors file");
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  json header;
  try {
    header = json::parse(text);
  } catch (const std::exception& e) {
    LOOM_FAIL("load: ", path, ": the JSON header (bytes 8..", 8 + header_len,
              ") does not parse: ", e.what());
  }
  LOOM_CHECK(header.is_object(), "load: ", path, ": the header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;

  // Validate every entry before reading any data.
  struct Entry {
    std::string name;
    DType dtype;
    IntList shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (metadata)
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          (*metadata)[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      continue;
    }
    const json& v = it.value();
    LOOM_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") &&
                   v.contains("data_offsets"),
               "load: ", path, ": entry \"", it.key(), "\" needs dtype, shape and data_offsets");
    Entry e;
    e.name = it.key();
    e.dtype = parse_dtype(v["dtype"].get<std::string>(), path, e.name);
    e.shape = v["shape"].get<IntList>();
    const auto offsets = v["data_offsets"].get<std::vector<uint64_t>>();
    LOOM_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1], "load: ", path, ": tensor \"",
               e.name, "\" has invalid data_offsets");
    e.begin = offsets[0];
    e.end = offsets[1];
    for (int64_t s : e.shape)
      LOOM_CHECK(s >= 0, "load: ", path, ": tensor \"", e.name, "\" has a negative dim");
    const uint64_t expected = static_cast<uint64_t>(numel_of(e.shape)) * element_size(e.dtype);
    LOOM_CHECK(e.end - e.begin == expected, "load: ", path, ": tensor \"", e.name, "\" of shape ",
               shape_str(e.shape), " and dtype ", dtype_name(e.dtype), " needs ", expected,
               " bytes but its data_offsets span ", e.end - e.begin);
    LOOM_CHECK(e.end <= data_size, "load: ", path, ": tensor \"", e.name, "\" ends at byte ",
               data_start + e.end, " but the file has only ", file_size,
               " bytes (truncated file?)");
    entries.push_back(e);
  }

  StateDict out;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype));
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    if (t.nbytes() > 0) in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    LOOM_CHECK(in.good(), "load: ", path, ": short read of tensor \"", e.name, "\" at byte ",
               data_start + e.begin);
    out.insert(e.name, t);
  }
  // Entries come in name order, as the JSON header's keys sort.
  return out;
}

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  save(module.state_dict(), path, metadata);
}

void load_into(Module& module, const std::string& path, bool strict) {
  module.load_state_dict(load(path), strict);
}

}  // namespace nn
}  // namespace loom
