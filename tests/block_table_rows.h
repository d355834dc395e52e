// Row factories for the slot-table checks every plan op shares (kvcanary: req_to_token or a paged
// block table): neither or both tables, the block size, the block table's dtype, rank, layout,
// pitch and positions per row, each with its exact message (validation_table.h runs them).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reject_rows.h"

namespace kvcanary::testing {

// The valid req_to_token replaced by a block table of `dtype` with `shape` and `strides` (its ids
// are never read: every row using it is refused) and `block_size`.
template <typename Case>
void GiveBlockTable(Case& c, typename Case::OpArgs& a, DType dtype, std::vector<int64_t> shape,
                    std::vector<int64_t> strides, int64_t block_size) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  a.inputs.block_table = KeptBuffer(c, dtype, elements, shape, strides);
  a.inputs.req_to_token = TensorView();
  a.inputs.block_size = block_size;
}

// A row that replaces req_to_token by a block table (GiveBlockTable's arguments).
template <typename Case>
RejectRow<Case> BlockTableRow(std::string name, DType dtype, std::vector<int64_t> shape,
                              std::vector<int64_t> strides, int64_t block_size,
                              std::string message) {
  return {std::move(name),
          [=](Case& c, typename Case::OpArgs& a) {
            GiveBlockTable(c, a, dtype, shape, strides, block_size);
          },
          std::move(message)};
}

// The slot table's checks (kvcanary: req_to_token or a paged block table): neither or both
// tables, block_size out of range or not 1 with req_to_token, then the block table's dtype, rank,
// row-view layout, pitch and positions per row. `tag` prefixes the row names.
template <typename Case>
std::vector<RejectRow<Case>> BlockTableRows(const std::string& tag) {
  using Args = typename Case::OpArgs;
  const std::string range = "kv-canary: block_size must be in [1, 1048576], got ";
  const int64_t huge = int64_t{1} << 43;  // columns a view may claim: validation reads none
  return {
      {tag + "NeitherReqToTokenNorBlockTable",
       [](Case&, Args& a) { a.inputs.req_to_token = TensorView(); },
       "kv-canary: req_to_token or block_table is required, got neither"},
      {tag + "BothReqToTokenAndBlockTable",
       [](Case& c, Args& a) {
         const TensorView table = a.inputs.req_to_token;
         GiveBlockTable(c, a, DType::kInt32, {4, 8}, {}, 1);
         a.inputs.req_to_token = table;
       },
       "kv-canary: req_to_token or block_table is required, not both"},
      SetInputRow<Case>(tag + "BlockSizeWithReqToToken", &PlanInputs::block_size, 16,
                        "kv-canary: block_size must be 1 with req_to_token, got 16"),
      BlockTableRow<Case>(tag + "BlockSizeZero", DType::kInt32, {4, 8}, {}, 0, range + "0"),
      BlockTableRow<Case>(tag + "BlockSizeTooLarge", DType::kInt64, {4, 8}, {}, 1048577,
                          range + "1048577"),
      BlockTableRow<Case>(tag + "BlockTableWrongDtype", DType::kFloat32, {4, 8}, {}, 16,
                          "kv-canary: block_table must have dtype torch.int32 or torch.int64, "
                          "got torch.float32"),
      BlockTableRow<Case>(tag + "BlockTableNot2D", DType::kInt32, {32}, {}, 16,
                          "kv-canary: block_table must be 2-D, got shape (32,)"),
      BlockTableRow<Case>(tag + "BlockTableTransposed", DType::kInt64, {4, 8}, {1, 4}, 16,
                          "kv-canary: block_table must have stride 1 in its last dimension and a "
                          "row stride >= its width, got shape (4, 8) strides (1, 4)"),
      {tag + "BlockTableStaleStride0",
       [](Case& c, Args& a) {
         GiveBlockTable(c, a, DType::kInt32, {4, 8}, {}, 16);
         a.inputs.req_to_token_stride0 = 16;
       },
       "kv-canary: req_to_token_stride0=16 does not match block_table.stride(0)=8"},
      {tag + "BlockTablePositionsOverflow",
       [huge](Case& c, Args& a) {
         GiveBlockTable(c, a, DType::kInt32, {1, 1}, {}, 1048576);
         a.inputs.block_table = TensorView(a.inputs.block_table.data(), DType::kInt32,
                                           Device::CPU(), {1, huge}, {huge, 1});
       },
       "kv-canary: block_table positions per row (max_blocks * block_size) overflows: " +
           std::to_string(huge) + " * 1048576"},
  };
}

}  // namespace kvcanary::testing
