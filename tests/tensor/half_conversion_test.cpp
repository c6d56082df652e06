// float16 and bfloat16 conversions, bit for bit against PyTorch 1.13
// (tools/pyloom/half_reference.py): every one of the 65,536 patterns of each
// type to float32 (NaN, inf, subnormals included), and about a million
// float32 inputs (every rounding tie of both types, overflow edges, random
// bits) to each type; through the Half/BFloat16 structs, through
// Tensor::to, and through safetensors F16/BF16 files both ways.  Also the
// type promotion table against torch.promote_types.
#include <cstring>
#include <map>
#include <sstream>

#include "nn/Serialize.h"
#include "tests/PythonRef.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::make_temp_dir;
using testing::run_python;

// The raw bits of a contiguous CPU tensor with 2- or 4-byte elements.
std::vector<uint32_t> bits_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const size_t size = element_size(c.dtype());
  std::vector<uint32_t> out(c.numel());
  const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
  for (size_t i = 0; i < out.size(); ++i) {
    if (size == 2) {
      uint16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);
      out[i] = v;
    } else {
      std::memcpy(&out[i], bytes + 4 * i, 4);
    }
  }
  return out;
}

// Counts the elements whose bits differ, and describes the first few.
::testing::AssertionResult SameBits(const char* what, const std::vector<uint32_t>& got,
                                    const std::vector<uint32_t>& want,
                                    const std::vector<uint32_t>& inputs) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, PyTorch "
                                         << want.size();
  size_t wrong = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (wrong++ < 5)
      first << "\n  input 0x" << std::hex << inputs[i] << ": loom 0x" << got[i] << ", PyTorch 0x"
            << want[i] << std::dec;
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << wrong << " of " << got.size()
                                       << " differ" << first.str();
}

class HalfConversion : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(make_temp_dir());
    std::string output;
    const int rc = run_python("half_reference.py", "make " + *dir_ + "/ref.safetensors", output);
    ASSERT_EQ(rc, 0) << output;
    ref_ = new nn::StateDict(nn::load(*dir_ + "/ref.safetensors"));
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete dir_;
  }
  const Tensor& ref(const std::string& name) { return ref_->at(name); }

  static std::string* dir_;
  static nn::StateDict* ref_;
};
std::string* HalfConversion::dir_ = nullptr;
nn::StateDict* HalfConversion::ref_ = nullptr;

TEST_F(HalfConversion, FilesHoldTheSixteenBitTypes) {
  EXPECT_EQ(ref("f16").dtype(), kFloat16);
  EXPECT_EQ(ref("bf16").dtype(), kBFloat16);
  EXPECT_EQ(ref("to_f16").dtype(), kFloat16);
  EXPECT_EQ(ref("f16").sizes(), IntList({65536}));
  const auto patterns = bits_of(ref("f16"));
  for (uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(patterns[i], i) << "F16 bits changed on load";
}

TEST_F(HalfConversion, EveryPatternToFloat32StructAndTensor) {
  const auto f16 = bits_of(ref("f16"));
  const auto bf16 = bits_of(ref("bf16"));
  std::vector<uint32_t> from_half(65536), from_bfloat(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float a = Half::from_bits(static_cast<uint16_t>(i));
    const float b = BFloat16::from_bits(static_cast<uint16_t>(i));
    std::memcpy(&from_half[i], &a, 4);
    std::memcpy(&from_bfloat[i], &b, 4);
  }
  EXPECT_TRUE(SameBits("Half -> float", from_half, bits_of(ref("f16_as_f32")), f16));
  EXPECT_TRUE(SameBits("BFloat16 -> float", from_bfloat, bits_of(ref("bf16_as_f32")), bf16));
  EXPECT_TRUE(SameBits("float16 tensor .to(kFloat32)", bits_of(ref("f16").to(kFloat32)),
                       bits_of(ref("f16_as_f32")), f16));
  EXPECT_TRUE(SameBits("bfloat16 tensor .to(kFloat32)", bits_of(ref("bf16").to(kFloat32)),
                       bits_of(ref("bf16_as_f32")), bf16));
}

TEST_F(HalfConversion, Float32ToSixteenBitsStructAndTensor) {
  const Tensor f32 = ref("f32");
  const auto inputs = bits_of(f32);
  const float* values = f32.data_ptr<float>();
  std::vector<uint32_t> to_half(inputs.size()), to_bfloat(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    to_half[i] = Half(values[i]).bits;
    to_bfloat[i] = BFloat16(values[i]).bits;
  }
  EXPECT_TRUE(SameBits("float -> Half", to_half, bits_of(ref("to_f16")), inputs));
  EXPECT_TRUE(SameBits("float -> BFloat16", to_bfloat, bits_of(ref("to_bf16")), inputs));
  EXPECT_TRUE(SameBits("float32 tensor .to(kFloat16)", bits_of(f32.to(kFloat16)),
                       bits_of(ref("to_f16")), inputs));
  EXPECT_TRUE(SameBits("float32 tensor .to(kBFloat16)", bits_of(f32.to(kBFloat16)),
                       bits_of(ref("to_bf16")), inputs));
}

TEST_F(HalfConversion, LoomFilesReadBackInPyTorchBitForBit) {
  nn::StateDict out;
  out.insert("f32", ref("f32"));
  out.insert("to_f16", ref("f32").to(kFloat16));
  out.insert("to_bf16", ref("f32").to(kBFloat16));
  out.insert("f16_as_f32", ref("f16").to(kFloat32));
  out.insert("bf16_as_f32", ref("bf16").to(kFloat32));
  const std::string path = *dir_ + "/loom.safetensors";
  nn::save(out, path);
  std::string output;
  EXPECT_EQ(run_python("half_reference.py", "check " + path, output), 0) << output;
  EXPECT_NE(output.find("OK"), std::string::npos) << output;
}

TEST(HalfTypes, ConversionBetweenSixteenBitTypesGoesThroughFloat) {
  // 1 + 2^-8 is a float16 but not a bfloat16: it rounds (tie to even) to 1.
  const Tensor h = full({3}, 1.00390625, TensorOptions(kFloat16));
  EXPECT_EQ(h.select(0, 1).item<double>(), 1.00390625);
  const Tensor b = h.to(kBFloat16);
  EXPECT_EQ(b.dtype(), kBFloat16);
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>({1.0f, 1.0f, 1.0f}));
  // 70000 overflows float16 but not bfloat16.
  EXPECT_TRUE(std::isinf(full({}, 70000.0, TensorOptions(kFloat16)).item<double>()));
  EXPECT_EQ(full({}, 70000.0, TensorOptions(kBFloat16)).item<double>(), 70144.0);
  // Integers and bool convert through float.
  EXPECT_EQ(arange(0, 4).to(kFloat16).to_vector<float>(), std::vector<float>({0, 1, 2, 3}));
  EXPECT_EQ(full({2}, 2.75, TensorOptions(kBFloat16)).to(kInt64).to_vector<int64_t>(),
            std::vector<int64_t>({2, 2}));
  EXPECT_EQ(full({1}, 0.5, TensorOptions(kFloat16)).to(kBool).to_vector<bool>(),
            std::vector<bool>({true}));
}

// Contiguous float32 <-> bfloat16 copies take a vectorised loop
// (tensor/cpu/Copy.cpp), strided ones the element loop of Half.h: the same
// bits, over several parallel chunks, for special values and exact halfway
// cases too.
TEST(HalfTypes, ContiguousAndStridedConversionsAgree) {
  Generator gen(5);
  std::vector<float> v = randn({300, 257}, kFloat32, &gen).mul(1000.0).to_vector<float>();
  const uint32_t specials[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,
                               0x80000000u, 0x00000001u, 0x007FFFFFu, 0x7F7FFFFFu, 0x3F808000u,
                               0x3F818000u, 0xBF808000u, 0x3F80FFFFu, 0x3F7F8000u};
  for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); ++i)
    std::memcpy(&v[i * 997], &specials[i], 4);
  const Tensor x = tensor<float>(v, {300, 257});
  const Tensor dense = x.to(kBFloat16);
  const Tensor strided = x.t().to(kBFloat16).t().contiguous();
  ASSERT_EQ(std::memcmp(dense.data_ptr(), strided.data_ptr(), dense.nbytes()), 0);
  const Tensor wide = dense.to(kFloat32);
  const Tensor wide_strided = dense.t().to(kFloat32).t().contiguous();
  ASSERT_EQ(std::memcmp(wide.data_ptr(), wide_strided.data_ptr(), wide.nbytes()), 0);
  // And each value as the scalar struct rounds it.
  const uint16_t* b = static_cast<const uint16_t*>(dense.data_ptr());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(b[i], BFloat16(v[i]).bits) << i;
}

TEST(HalfTypes, NamesSizesAndCategories) {
  EXPECT_EQ(dtype_name(kFloat16), "float16");
  EXPECT_EQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_EQ(kHalf, kFloat16);
  EXPECT_EQ(element_size(kFloat16), 2u);
  EXPECT_EQ(element_size(kBFloat16), 2u);
  EXPECT_TRUE(is_floating_point(kFloat16));
  EXPECT_TRUE(is_floating_point(kBFloat16));
  EXPECT_TRUE(is_reduced_float(kBFloat16));
  EXPECT_FALSE(is_reduced_float(kFloat32));
  EXPECT_TRUE(zeros({2}, TensorOptions(kBFloat16)).is_floating_point());
}

TEST(HalfTypes, PromotionMatchesTorchPromoteTypes) {
  const std::map<std::string, DType> by_name = {
      {"float32", kFloat32}, {"float64", kFloat64}, {"int64", kInt64},      {"int32", kInt32},
      {"uint8", kUInt8},     {"bool", kBool},       {"float16", kFloat16}, {"bfloat16", kBFloat16}};
  std::string output;
  ASSERT_EQ(run_python("half_reference.py", "promote", output), 0) << output;
  std::istringstream lines(output);
  std::string a, b, result;
  int pairs = 0;
  while (lines >> a >> b >> result) {
    ASSERT_TRUE(by_name.count(a) && by_name.count(b) && by_name.count(result)) << output;
    EXPECT_EQ(promote_types(by_name.at(a), by_name.at(b)), by_name.at(result))
        << a << " with " << b;
    ++pairs;
  }
  EXPECT_EQ(pairs, 64) << output;
}

}  // namespace
}  // namespace loom
