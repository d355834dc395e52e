// TensorView: dense strides, torch's contiguity rule, message rendering.
#include "kvcanary/tensor.h"

#include <gtest/gtest.h>

#include "kvcanary/error.h"

namespace kvcanary {
namespace {

TEST(Tensor, DefaultViewIsAbsent) { EXPECT_FALSE(TensorView().defined()); }

TEST(Tensor, FillsRowMajorStrides) {
  int64_t data[12];
  TensorView t(data, DType::kInt64, Device::CPU(), {3, 4});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.stride(0), 4);
  EXPECT_EQ(t.stride(1), 1);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.ShapeString(), "(3, 4)");
  EXPECT_EQ(t.StridesString(), "(4, 1)");
}

TEST(Tensor, ContiguityIgnoresSizeOneDimensionsLikeTorch) {
  int64_t data[4];
  EXPECT_TRUE(TensorView(data, DType::kInt64, Device::CPU(), {1, 4}, {99, 1}).is_contiguous());
  EXPECT_FALSE(TensorView(data, DType::kInt64, Device::CPU(), {2, 2}, {1, 2}).is_contiguous());
  EXPECT_TRUE(TensorView(data, DType::kInt64, Device::CPU(), {0, 2}, {7, 3}).is_contiguous());
}

TEST(Tensor, RendersShapesAsPythonTuples) {
  int64_t data[5];
  EXPECT_EQ(TensorView(data, DType::kInt64, Device::CPU(), {5}).ShapeString(), "(5,)");
  EXPECT_EQ(TensorView(data, DType::kInt64, Device::CPU(), {}).ShapeString(), "()");
}

TEST(Tensor, RendersDTypesAndDevicesAsTorchDoes) {
  EXPECT_STREQ(DTypeName(DType::kInt64), "torch.int64");
  EXPECT_STREQ(DTypeName(DType::kUInt8), "torch.uint8");
  EXPECT_STREQ(DTypeName(DType::kBFloat16), "torch.bfloat16");
  EXPECT_EQ(Device::CPU().ToString(), "cpu");
  EXPECT_EQ(Device::CUDA(3).ToString(), "cuda:3");
  EXPECT_EQ(ItemSize(DType::kBFloat16), 2);
}

TEST(Tensor, RejectsTooManyDimensionsAndMismatchedStrides) {
  int64_t data[1];
  EXPECT_THROW(TensorView(data, DType::kInt64, Device::CPU(), {1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(TensorView(data, DType::kInt64, Device::CPU(), {1, 1}, {1}), Error);
}

// A shape whose element count overflows int64 builds (no undefined arithmetic) and reports a
// saturated count, which the ops' bounds check then refuses.
TEST(Tensor, HugeShapesSaturateInsteadOfOverflowing) {
  int64_t data[1] = {};
  const TensorView huge(data, DType::kInt64, Device::CPU(), {int64_t{1} << 62, 4, 4});
  EXPECT_EQ(huge.numel(), INT64_MAX);
  EXPECT_EQ(huge.stride(2), 1);
  EXPECT_EQ(huge.stride(1), 4);
  EXPECT_EQ(huge.stride(0), 16);
  const TensorView wider(data, DType::kInt64, Device::CPU(), {4, int64_t{1} << 62, 4});
  EXPECT_EQ(wider.stride(0), INT64_MAX);
}

// The contiguity test multiplies sizes too: past int64 it saturates, so a shape whose dense
// strides overflow is simply not contiguous (the UBSan build runs this test).
TEST(Tensor, ContiguityOfHugeShapesIsDefined) {
  int64_t data[1] = {};
  const int64_t big = int64_t{1} << 62;
  EXPECT_FALSE(
      TensorView(data, DType::kInt64, Device::CPU(), {4, big, 4}, {0, 4, 1}).is_contiguous());
  EXPECT_TRUE(
      TensorView(data, DType::kInt64, Device::CPU(), {1, big, 4}, {0, 4, 1}).is_contiguous());
  EXPECT_TRUE(TensorView(data, DType::kInt64, Device::CPU(), {big, 1}, {1, 0}).is_contiguous());
}

}  // namespace
}  // namespace kvcanary
