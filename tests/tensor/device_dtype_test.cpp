// Device parsing/printing and DType names, sizes and promotion.
#include <sstream>
#include <unordered_set>

#include "tests/TestUtil.h"

namespace loom {
namespace {

TEST(Device, ParsesAndPrints) {
  Device cpu("cpu");
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_EQ(cpu.index, 0);
  EXPECT_EQ(cpu.str(), "cpu");
  Device cpu1("cpu:1");
  EXPECT_TRUE(cpu1.is_cpu());
  EXPECT_EQ(cpu1.index, 1);
  EXPECT_EQ(cpu1.str(), "cpu:1");
  Device cuda0("cuda:0");
  EXPECT_TRUE(cuda0.is_cuda());
  EXPECT_EQ(cuda0.index, 0);
  EXPECT_EQ(cuda0.str(), "cuda:0");
  EXPECT_EQ(Device("cuda").str(), "cuda:0");
  EXPECT_EQ(Device("cuda:12").index, 12);
  EXPECT_EQ(Device("cpu:0"), Device(kCPU));
  std::ostringstream out;
  out << Device(kCUDA, 3) << " " << Device(kCPU, 2);
  EXPECT_EQ(out.str(), "cuda:3 cpu:2");
}

TEST(Device, EqualityOrderAndHash) {
  EXPECT_NE(Device("cpu"), Device("cpu:1"));
  EXPECT_NE(Device("cpu:0"), Device("cuda:0"));
  EXPECT_TRUE(Device("cpu:1") < Device("cpu:2"));
  EXPECT_TRUE(Device("cpu:5") < Device("cuda:0"));
  std::unordered_set<Device> set{Device("cpu"), Device("cpu:1"), Device("cpu"), Device("cuda:0")};
  EXPECT_EQ(set.size(), 3u);
}

TEST(Device, BadStringsThrow) {
  EXPECT_LOOM_ERROR(Device("gpu"), "Device", "cannot parse \"gpu\"", "cpu:N");
  EXPECT_LOOM_ERROR(Device("cpu:"), "Device", "cannot parse \"cpu:\"", "index");
  EXPECT_LOOM_ERROR(Device("cpu:-1"), "Device", "cpu:-1");
  EXPECT_LOOM_ERROR(Device("cuda:x"), "Device", "cuda:x");
  EXPECT_LOOM_ERROR(Device("CPU"), "Device", "CPU");
  EXPECT_LOOM_ERROR(Device(""), "Device");
  EXPECT_LOOM_ERROR(Device("cpu:1:2"), "Device");
  EXPECT_LOOM_ERROR(Device(kCPU, -1), "Device", "index must be >= 0");
}

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(dtype_name(kFloat32), "float32");
  EXPECT_EQ(dtype_name(kFloat64), "float64");
  EXPECT_EQ(dtype_name(kInt64), "int64");
  EXPECT_EQ(dtype_name(kInt32), "int32");
  EXPECT_EQ(dtype_name(kUInt8), "uint8");
  EXPECT_EQ(dtype_name(kBool), "bool");
  EXPECT_EQ(element_size(kFloat32), 4u);
  EXPECT_EQ(element_size(kFloat64), 8u);
  EXPECT_EQ(element_size(kInt64), 8u);
  EXPECT_EQ(element_size(kInt32), 4u);
  EXPECT_EQ(element_size(kUInt8), 1u);
  EXPECT_EQ(element_size(kBool), 1u);
  EXPECT_TRUE(is_floating_point(kFloat32));
  EXPECT_TRUE(is_floating_point(kFloat64));
  EXPECT_FALSE(is_floating_point(kInt64));
  EXPECT_FALSE(is_floating_point(kBool));
  EXPECT_EQ(kFloat, kFloat32);
  EXPECT_EQ(kLong, kInt64);
  EXPECT_EQ(dtype_of<double>(), kFloat64);
  EXPECT_EQ(dtype_of<bool>(), kBool);
  std::ostringstream out;
  out << kInt32;
  EXPECT_EQ(out.str(), "int32");
}

TEST(DType, Promotion) {
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt64, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kFloat64, kBool), kFloat64);
  for (DType d : {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool})
    EXPECT_EQ(promote_types(d, d), d);
  // As seen by ops.
  EXPECT_EQ((tensor<int64_t>({1}) + tensor<float>({1})).dtype(), kFloat32);
  EXPECT_EQ((tensor<float>({1}) + tensor<double>({1})).dtype(), kFloat64);
  EXPECT_EQ((tensor<int32_t>({1}) + tensor<int64_t>({1})).dtype(), kInt64);
}

TEST(DType, DispatchCallsTheMatchingType) {
  for (DType d : {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool}) {
    const size_t size = dispatch_dtype(d, [](auto tag) { return sizeof(typename decltype(tag)::type); });
    EXPECT_EQ(size, element_size(d)) << dtype_name(d);
  }
  EXPECT_LOOM_ERROR(dispatch_floating(kInt64, "myop", [](auto) {}), "myop",
                    "floating-point", "int64");
}

TEST(DeviceAndDType, TensorsReportThem) {
  Tensor t = zeros({2, 3}, TensorOptions(kFloat64).device(Device("cpu:1")));
  EXPECT_EQ(t.device(), Device("cpu:1"));
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.element_size(), 8u);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.describe(), "[float64 [2, 3] on cpu:1]");
  Tensor i = t.to(kInt32);
  EXPECT_EQ(i.dtype(), kInt32);
  EXPECT_EQ(i.device(), Device("cpu:1"));
}

}  // namespace
}  // namespace loom
