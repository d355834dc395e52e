#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "kvcanary/error.h"
#include "sim/req_to_token_table.h"

namespace kvcanary::sim {
namespace {

TEST(ReqToTokenTable, ShapeAndPaddingRow) {
  ReqToTokenTable table(Device::CPU(), 3, 7, nullptr);
  EXPECT_EQ(table.num_rows(), 4);
  EXPECT_EQ(table.width(), 7);
  EXPECT_EQ(table.row_pitch(), 7);
  const TensorView view = table.View();
  EXPECT_EQ(view.dtype(), DType::kInt32);
  EXPECT_EQ(view.size(0), 4);
  EXPECT_EQ(view.size(1), 7);
  EXPECT_EQ(view.stride(0), 7);
  EXPECT_TRUE(view.is_contiguous());
  // Row 0 is never handed out and cannot be written.
  for (int i = 0; i < 3; ++i) EXPECT_NE(table.AllocateRow(), 0);
  EXPECT_EQ(table.AllocateRow(), std::nullopt);
  EXPECT_THROW(table.Set(0, 0, 5), std::logic_error);
  for (int64_t pos = 0; pos < 7; ++pos) EXPECT_EQ(table.Get(0, pos), 0);
}

TEST(ReqToTokenTable, RowsAreHandedOutInOrderAndReusedLastFreedFirst) {
  ReqToTokenTable table(Device::CPU(), 4, 5, nullptr);
  EXPECT_EQ(table.AllocateRow(), 1);
  EXPECT_EQ(table.AllocateRow(), 2);
  EXPECT_EQ(table.AllocateRow(), 3);
  table.FreeRow(1);
  table.FreeRow(3);
  EXPECT_EQ(table.NumFreeRows(), 3);
  EXPECT_EQ(table.AllocateRow(), 3);
  EXPECT_EQ(table.AllocateRow(), 1);
  EXPECT_EQ(table.AllocateRow(), 4);
  EXPECT_THROW(table.FreeRow(0), std::logic_error);
}

TEST(ReqToTokenTable, SetWritesTheHostRowAndTheView) {
  ReqToTokenTable table(Device::CPU(), 2, 6, nullptr);
  const int64_t row = *table.AllocateRow();
  table.SetRange(row, 1, {11, 12, 13});
  table.Set(row, 5, 99);
  table.Upload();  // CPU: the same memory, nothing to copy
  EXPECT_EQ(table.Get(row, 0), 0);
  EXPECT_EQ(table.Get(row, 2), 12);
  EXPECT_EQ(table.HostRow(row)[5], 99);
  const int32_t* device = table.View().data_as<int32_t>();
  EXPECT_EQ(device[row * 6 + 3], 13);
  EXPECT_THROW(table.Set(row, 6, 1), std::out_of_range);
  EXPECT_THROW(table.Set(row, -1, 1), std::out_of_range);
  EXPECT_THROW(table.Get(3, 0), std::out_of_range);
}

TEST(ReqToTokenTable, AReusedRowIsZeroed) {
  ReqToTokenTable table(Device::CPU(), 1, 4, nullptr);
  const int64_t row = *table.AllocateRow();
  table.SetRange(row, 0, {5, 6, 7, 8});
  table.FreeRow(row);
  EXPECT_THROW(table.FreeRow(row), std::logic_error);    // double free
  EXPECT_THROW(table.Set(row, 0, 1), std::logic_error);  // writing a free row
  const int64_t again = *table.AllocateRow();
  ASSERT_EQ(again, row);
  for (int64_t pos = 0; pos < 4; ++pos) EXPECT_EQ(table.Get(again, pos), 0) << pos;
}

TEST(ReqToTokenTable, InsideAWiderParentTheViewIsStrided) {
  // max_context_len 5 inside a parent of width 8: the `stride_view` fault's table.
  ReqToTokenTable table(Device::CPU(), 3, 5, nullptr, 8);
  EXPECT_EQ(table.row_pitch(), 8);
  const TensorView view = table.View();
  EXPECT_EQ(view.size(0), 4);
  EXPECT_EQ(view.size(1), 5);
  EXPECT_EQ(view.stride(0), 8);
  EXPECT_EQ(view.stride(1), 1);
  EXPECT_FALSE(view.is_contiguous());
  const TensorView parent = table.WiderView();
  EXPECT_EQ(parent.size(1), 8);
  EXPECT_EQ(parent.stride(0), 8);
  EXPECT_EQ(parent.data(), view.data());

  const int64_t row = *table.AllocateRow();
  table.Set(row, 4, 42);
  const int32_t* base = view.data_as<int32_t>();
  EXPECT_EQ(base[row * view.stride(0) + 4], 42);
  // The old hard-coded stride (5) reads another place: the fault's point.
  EXPECT_NE(base[row * 5 + 4], 42);
  // Columns past max_context_len stay zero.
  for (int64_t c = 5; c < 8; ++c) EXPECT_EQ(base[row * 8 + c], 0);
}

TEST(ReqToTokenTable, MovingIntoAWiderParentKeepsTheEntries) {
  ReqToTokenTable table(Device::CPU(), 2, 4, nullptr);
  const int64_t a = *table.AllocateRow();
  const int64_t b = *table.AllocateRow();
  table.SetRange(a, 0, {1, 2, 3, 4});
  table.SetRange(b, 0, {5, 6, 7, 8});
  table.SetRowPitch(6);
  EXPECT_EQ(table.row_pitch(), 6);
  EXPECT_EQ(table.View().stride(0), 6);
  const int32_t* base = table.View().data_as<int32_t>();
  EXPECT_EQ(base[b * 6 + 0], 5);
  EXPECT_EQ(base[b * 6 + 3], 8);
  EXPECT_EQ(base[a * 6 + 4], 0);  // a new parent column
  EXPECT_EQ(table.Get(a, 2), 3);
  EXPECT_THROW(table.SetRowPitch(3), Error);
  table.MutableHostRow(a)[1] = 42;  // a fault's bypass of Set
  EXPECT_EQ(table.Get(a, 1), 42);
}

TEST(ReqToTokenTable, AStaleRowStrideViewStaysInsideTheAllocation) {
  ReqToTokenTable table(Device::CPU(), 3, 5, nullptr, 8);  // 4 rows x 8 = 32 entries
  const TensorView narrow = table.ViewWithRowStride(5);
  EXPECT_EQ(narrow.size(0), 4);
  EXPECT_EQ(narrow.stride(0), 5);
  const TensorView wide = table.ViewWithRowStride(13);  // rows at 0, 13, 26 (26 + 5 <= 32)
  EXPECT_EQ(wide.size(0), 3);
  EXPECT_EQ(wide.size(1), 5);
  EXPECT_THROW(table.ViewWithRowStride(0), std::logic_error);
}

TEST(ReqToTokenTable, InvalidGeometryThrows) {
  EXPECT_THROW(ReqToTokenTable(Device::CPU(), 0, 5, nullptr), Error);
  EXPECT_THROW(ReqToTokenTable(Device::CPU(), 2, 0, nullptr), Error);
  EXPECT_THROW(ReqToTokenTable(Device::CPU(), 2, 5, nullptr, 4), Error);
}

TEST(ReqToTokenTable, CudaUploadCopiesTheEditedRows) {
  if (!runtime::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  runtime::OwnedStream stream(Device::CUDA(0));
  ReqToTokenTable table(Device::CUDA(0), 3, 5, stream.handle(), 8);
  const int64_t a = *table.AllocateRow();
  const int64_t b = *table.AllocateRow();
  table.SetRange(a, 0, {1, 2, 3, 4, 5});
  table.Set(b, 4, 9);
  auto device_copy = [&] {
    std::vector<int32_t> out(4 * 8, -1);
    runtime::CopyBytesAsync(out.data(), table.View().data(), 4 * 8 * 4, Device::CUDA(0),
                            stream.handle());
    runtime::SynchronizeStream(Device::CUDA(0), stream.handle());
    return out;
  };
  EXPECT_EQ(device_copy()[a * 8 + 2], 0);  // not uploaded yet
  table.Upload();
  auto device = device_copy();
  EXPECT_EQ(device[a * 8 + 2], 3);
  EXPECT_EQ(device[b * 8 + 4], 9);
  EXPECT_EQ(device[a * 8 + 5], 0);  // parent columns stay zero
  table.FreeRow(a);
  table.Upload();
  EXPECT_EQ(device_copy()[a * 8 + 0], 0);
}

}  // namespace
}  // namespace kvcanary::sim
