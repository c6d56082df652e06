#include <fstream>

#include "tests/PythonRef.h"

namespace loom {
namespace {

using testing::AllClose;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Safetensors, RoundTripsEveryDtypeAndLayout) {
  const std::string dir = testing::make_temp_dir();
  nn::StateDict in;
  in.insert("f32", randn({2, 3}));
  in.insert("f64_t", randn({3, 2}, kFloat64).t());  // non-contiguous
  in.insert("i64", arange(5));
  in.insert("u8", tensor<uint8_t>({1, 2, 250}));
  in.insert("b", tensor<bool>({true, false}));
  in.insert("scalar", scalar_tensor(3.5));
  in.insert("empty", zeros({0, 4}));
  nn::save(in, dir + "/x.safetensors", {{"framework", "loom"}});
  nn::Metadata meta;
  const nn::StateDict out = nn::load(dir + "/x.safetensors", &meta);
  EXPECT_EQ(meta.at("framework"), "loom");
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [k, v] : in) {
    EXPECT_EQ(out.at(k).dtype(), v.dtype()) << k;
    EXPECT_EQ(out.at(k).sizes(), v.sizes()) << k;
    EXPECT_TRUE(AllClose(out.at(k), v)) << k;
  }
  // Header layout: 8-byte little-endian length, then JSON, data 8-byte aligned.
  const std::string bytes = read_all(dir + "/x.safetensors");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
}

TEST(Safetensors, CorruptFilesGiveClearErrors) {
  const std::string dir = testing::make_temp_dir();
  nn::StateDict in;
  in.insert("w", randn({16, 16}));
  nn::save(in, dir + "/good.safetensors");
  const std::string good = read_all(dir + "/good.safetensors");

  write_all(dir + "/short.safetensors", good.substr(0, good.size() - 10));
  EXPECT_LOOM_ERROR(nn::load(dir + "/short.safetensors"), "short.safetensors", "\"w\"",
                    "truncated");
  write_all(dir + "/tiny.safetensors", good.substr(0, 5));
  EXPECT_LOOM_ERROR(nn::load(dir + "/tiny.safetensors"), "too short");
  std::string huge = good;
  huge[7] = 0x7f;  // header length far beyond the file
  write_all(dir + "/huge.safetensors", huge);
  EXPECT_LOOM_ERROR(nn::load(dir + "/huge.safetensors"), "header length", "exceeds the file size");
  std::string garbled = good;
  garbled[9] = '#';
  write_all(dir + "/garbled.safetensors", garbled);
  EXPECT_LOOM_ERROR(nn::load(dir + "/garbled.safetensors"), "does not parse");
  EXPECT_LOOM_ERROR(nn::load(dir + "/missing.safetensors"), "cannot open", "missing.safetensors");
}

TEST(Safetensors, FailedSaveLeavesTheOldFile) {
  const std::string dir = testing::make_temp_dir();
  nn::StateDict v1;
  v1.insert("w", ones({4}));
  nn::save(v1, dir + "/ckpt.safetensors");
  nn::StateDict bad;
  bad.insert("w", ones({4}));
  bad.insert("u", Tensor());  // undefined: the save must fail before touching the file
  EXPECT_LOOM_ERROR(nn::save(bad, dir + "/ckpt.safetensors"), "\"u\" is undefined");
  EXPECT_TRUE(AllClose(nn::load(dir + "/ckpt.safetensors").at("w"), ones({4})));
  // Saving into a folder that does not exist fails without creating anything.
  EXPECT_LOOM_ERROR(nn::save(v1, dir + "/no/such/dir/x.safetensors"), "cannot write");
}

TEST(Checkpoint, ModuleLoadChecksNamesAndShapes) {
  const std::string dir = testing::make_temp_dir();
  nn::models::ConvNet a;
  nn::save(*a, dir + "/convnet.safetensors");
  nn::models::ConvNet b;
  nn::load_into(*b, dir + "/convnet.safetensors");
  EXPECT_TRUE(AllClose(b->fc->weight, a->fc->weight));
  nn::models::ConvNet c(7);
  EXPECT_LOOM_ERROR(nn::load_into(*c, dir + "/convnet.safetensors"), "size mismatch for fc.weight",
                    "size mismatch for fc.bias");
}

// Train k steps, checkpoint model + optimizer, resume in fresh objects for k
// more: bit-identical to 2k uninterrupted steps.
TEST(Checkpoint, ResumingTrainingIsBitIdentical) {
  const std::string dir = testing::make_temp_dir();
  manual_seed(5);
  Tensor x = randn({32, 1, 28, 28});
  Tensor y = randint(0, 10, {32});
  auto train = [&](nn::models::ConvNet& model, optim::SGD& opt, int steps) {
    for (int i = 0; i < steps; ++i) {
      opt.zero_grad();
      cross_entropy(model(x), y).backward();
      opt.step();
    }
  };
  const int k = 3;
  manual_seed(11);
  nn::models::ConvNet straight;
  optim::SGD straight_opt(straight->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  train(straight, straight_opt, 2 * k);

  manual_seed(11);
  nn::models::ConvNet first;
  optim::SGD first_opt(first->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  train(first, first_opt, k);
  nn::save(*first, dir + "/model.safetensors");
  nn::save(first_opt.state_dict(), dir + "/optim.safetensors");

  manual_seed(99);  // different init: everything must come from the files
  nn::models::ConvNet resumed;
  optim::SGD resumed_opt(resumed->parameters(), optim::SGDOptions(0.5));
  nn::load_into(*resumed, dir + "/model.safetensors");
  resumed_opt.load_state_dict(nn::load(dir + "/optim.safetensors"));
  EXPECT_DOUBLE_EQ(resumed_opt.param_groups()[0].lr(), 0.05);
  train(resumed, resumed_opt, k);

  const auto want = straight->state_dict();
  for (const auto& [name, t] : resumed->state_dict()) {
    if (t.is_floating_point()) EXPECT_EQ(t.to_vector<float>(), want.at(name).to_vector<float>()) << name;
    else EXPECT_EQ(t.to_vector<int64_t>(), want.at(name).to_vector<int64_t>()) << name;
  }
}

}  // namespace
}  // namespace loom
