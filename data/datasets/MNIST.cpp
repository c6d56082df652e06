#include "data/datasets/MNIST.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstring>

#include "tensor/Factory.h"
#include "tensor/Parallel.h"

namespace loom {
namespace data {
namespace datasets {
namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Reads exactly n bytes (gzread reads plain files too) or throws.
void read_exact(gzFile f, const std::string& path, void* out, size_t n, size_t offset) {
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, static_cast<char*>(out) + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      LOOM_FAIL("MNIST: ", path, ": corrupt data at byte ", offset + done, " (", msg, ")");
    }
    if (got == 0) {
      LOOM_FAIL("MNIST: ", path, ": short read: expected ", n, " bytes at byte offset ", offset,
                " but the file ends after ", done, " (truncated file?)");
    }
    done += static_cast<size_t>(got);
  }
}

uint32_t big_endian(const uint8_t* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

}  // namespace

std::string find_idx(const std::string& root, const std::string& base) {
  const std::string plain = root + "/" + base;
  if (file_exists(plain)) return plain;
  if (file_exists(plain + ".gz")) return plain + ".gz";
  LOOM_FAIL("MNIST: neither ", plain, " nor ", plain,
            ".gz exists; run tools/setup.sh to create the default data in data/mnist, or pass "
            "--data-dir pointing at a folder with the MNIST IDX files");
}

IdxFile read_idx(const std::string& path, int expected_rank) {
  gzFile f = gzopen(path.c_str(), "rb");
  LOOM_CHECK(f != nullptr, "MNIST: cannot open ", path, ": ", std::strerror(errno));
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};
  uint8_t header[4];
  read_exact(f, path, header, 4, 0);
  const uint32_t magic = big_endian(header);
  // 0x00 0x00 type(0x08 = unsigned byte) rank
  const uint32_t expected_magic = 0x00000800u | static_cast<uint32_t>(expected_rank);
  LOOM_CHECK(magic == expected_magic, "MNIST: ", path, ": bad magic number ", magic, " (expected ",
             expected_magic, " for an IDX file of unsigned bytes with ", expected_rank,
             " dims); is this the right file?");
  IdxFile out;
  size_t count = 1;
  for (int d = 0; d < expected_rank; ++d) {
    uint8_t b[4];
    read_exact(f, path, b, 4, 4 + 4 * d);
    out.dims.push_back(big_endian(b));
    count *= out.dims.back();
  }
  LOOM_CHECK(count < (size_t(1) << 34), "MNIST: ", path, ": implausible dims in header");
  out.bytes.resize(count);
  read_exact(f, path, out.bytes.data(), count, 4 + 4 * expected_rank);
  uint8_t extra;
  LOOM_CHECK(gzread(f, &extra, 1) == 0, "MNIST: ", path, ": unexpected data after ", count,
             " payload bytes (the header's dims do not match the file size)");
  return out;
}

MNIST::MNIST(const std::string& root, bool train, Normalize normalize) {
  LOOM_CHECK(normalize.std > 0, "MNIST: Normalize std must be positive, got ", normalize.std);
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = find_idx(root, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_idx(root, prefix + "-labels-idx1-ubyte");
  const IdxFile images = read_idx(image_path, 3);
  const IdxFile labels = read_idx(label_path, 1);
  LOOM_CHECK(images.dims[1] == 28 && images.dims[2] == 28, "MNIST: ", image_path,
             ": expected 28x28 images, got ", images.dims[1], "x", images.dims[2]);
  LOOM_CHECK(images.dims[0] == labels.dims[0], "MNIST: count mismatch: ", image_path, " has ",
             images.dims[0], " images but ", label_path, " has ", labels.dims[0], " labels");
  const int64_t n = images.dims[0];
  images_ = empty({n, 1, 28, 28});
  targets_ = empty({n}, kInt64);
  float* img = images_.data_ptr<float>();
  const float scale = static_cast<float>(1.0 / 255.0);
  const float mean = static_cast<float>(normalize.mean), inv_std = static_cast<float>(1.0 / normalize.std);
  const uint8_t* src = images.bytes.data();
  parallel_for(0, n * 784, kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) img[i] = (src[i] * scale - mean) * inv_std;
  });
  int64_t* tgt = targets_.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    LOOM_CHECK(labels.bytes[i] < 10, "MNIST: ", label_path, ": label ", int(labels.bytes[i]),
               " at index ", i, " is not a digit 0-9");
    tgt[i] = labels.bytes[i];
  }
}

Example MNIST::get(int64_t index) const {
  Example b = get_batch({index});
  return Example{b.data.reshape({1, 28, 28}), b.target.reshape({})};
}

Example MNIST::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  const int64_t b = static_cast<int64_t>(indices.size());
  Example out{empty({b, 1, 28, 28}), empty({b}, kInt64)};
  const float* img = images_.data_ptr<float>();
  const int64_t* tgt = targets_.data_ptr<int64_t>();
  float* dst = out.data.data_ptr<float>();
  int64_t* dst_t = out.target.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t k = indices[i];
    LOOM_CHECK(k >= 0 && k < n, "MNIST: index ", k, " is out of range for a dataset of ", n);
    std::memcpy(dst + i * 784, img + k * 784, 784 * sizeof(float));
    dst_t[i] = tgt[k];
  }
  return out;
}

}  // namespace datasets
}  // namespace data
}  // namespace loom
