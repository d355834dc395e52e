#include "kvcanary/runtime/device_memory.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

TEST(DeviceMemory, CpuBufferIsZeroFilledAndAligned) {
  DeviceBuffer buffer(Device::CPU(), 100);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 256, 0u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(buffer.data_as<uint8_t>()[i], 0) << i;
}

TEST(DeviceMemory, CopyAndZeroOnCpu) {
  DeviceBuffer buffer(Device::CPU(), 16);
  const char text[16] = "fifteen chars!!";
  CopyBytesAsync(buffer.data(), text, 16, Device::CPU(), nullptr);
  EXPECT_EQ(std::memcmp(buffer.data(), text, 16), 0);
  ZeroBytesAsync(buffer.data_as<char>() + 4, 4, Device::CPU(), nullptr);
  EXPECT_EQ(buffer.data_as<char>()[3], 't');
  EXPECT_EQ(buffer.data_as<char>()[4], 0);
  EXPECT_EQ(buffer.data_as<char>()[8], 'c');
}

TEST(DeviceMemory, ViewChecksItFits) {
  DeviceBuffer buffer(Device::CPU(), 64);
  TensorView view = buffer.View(DType::kInt64, {2, 4});
  EXPECT_EQ(view.size(0), 2);
  EXPECT_EQ(view.data(), buffer.data());
  EXPECT_THROW(buffer.View(DType::kInt64, {9}), Error);
  EXPECT_THROW(buffer.View(DType::kInt64, {8}, 8), Error);
}

TEST(DeviceMemory, MoveTransfersOwnership) {
  DeviceBuffer a(Device::CPU(), 32);
  void* data = a.data();
  DeviceBuffer b = std::move(a);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.bytes(), 32);
}

}  // namespace
}  // namespace kvcanary::runtime
