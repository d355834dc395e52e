#include "sim/block_table.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"

namespace kvcanary::sim {

int64_t BlocksSpanning(int64_t tokens, int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

std::vector<int64_t> WholeBlocksOf(const std::vector<int64_t>& slots, int64_t block_size) {
  std::vector<int64_t> blocks;
  for (int64_t slot : slots) {
    if (slot % block_size == 0) blocks.push_back(slot / block_size);
  }
  // Every slot of every listed block, and nothing else: count the slots per block.
  std::vector<int64_t> sorted_blocks = blocks;
  std::sort(sorted_blocks.begin(), sorted_blocks.end());
  const bool distinct =
      std::adjacent_find(sorted_blocks.begin(), sorted_blocks.end()) == sorted_blocks.end();
  bool whole = distinct && slots.size() == blocks.size() * static_cast<size_t>(block_size);
  for (size_t i = 0; whole && i < slots.size(); ++i) {
    whole = std::binary_search(sorted_blocks.begin(), sorted_blocks.end(), slots[i] / block_size);
  }
  if (!whole) {
    throw std::logic_error("kv-canary sim: " + std::to_string(slots.size()) +
                           " slots are not whole blocks of " + std::to_string(block_size));
  }
  return blocks;
}

BlockTable::BlockTable(Device device, int64_t num_rows, int64_t max_blocks, int64_t block_size,
                       StreamHandle stream)
    : device_(device),
      num_rows_(num_rows),
      max_blocks_(max_blocks),
      block_size_(block_size),
      stream_(stream) {
  if (num_rows < 1 || max_blocks < 1 || block_size < 1) {
    ThrowError("kv-canary sim: block table: rows, max_blocks and block_size must be >= 1, got ",
               num_rows, ", ", max_blocks, ", ", block_size);
  }
  const int64_t entries = CheckedMul("block table entries (rows x max_blocks)", num_rows, max_blocks);
  device_buffer_ = runtime::DeviceBuffer(
      device, CheckedMul("block table bytes", entries, static_cast<int64_t>(sizeof(int32_t))));
  if (device.type == DeviceType::kCUDA) {
    host_.assign(static_cast<size_t>(entries), 0);
    dirty_.assign(static_cast<size_t>(num_rows), false);
  }
}

int32_t* BlockTable::host_data() const {
  if (!host_.empty()) return const_cast<int32_t*>(host_.data());
  return device_buffer_.data_as<int32_t>();
}

void BlockTable::CheckEntry(int64_t row, int64_t index) const {
  if (row < 0 || row >= num_rows_ || index < 0 || index >= max_blocks_) {
    throw std::out_of_range("kv-canary sim: block table entry [" + std::to_string(row) + ", " +
                            std::to_string(index) + "] outside [" + std::to_string(num_rows_) +
                            ", " + std::to_string(max_blocks_) + "]");
  }
}

void BlockTable::MarkDirty(int64_t row) {
  if (!dirty_.empty()) dirty_[row] = true;
}

void BlockTable::Set(int64_t row, int64_t index, int64_t block) {
  CheckEntry(row, index);
  if (row == 0) throw std::out_of_range("kv-canary sim: block table row 0 is the padding row");
  host_data()[row * max_blocks_ + index] = static_cast<int32_t>(block);
  MarkDirty(row);
}

int32_t BlockTable::Get(int64_t row, int64_t index) const {
  CheckEntry(row, index);
  return host_data()[row * max_blocks_ + index];
}

void BlockTable::ClearRow(int64_t row) {
  CheckEntry(row, 0);
  std::fill_n(host_data() + row * max_blocks_, max_blocks_, 0);
  MarkDirty(row);
}

int64_t BlockTable::SlotAt(int64_t row, int64_t position) const {
  return int64_t{Get(row, position / block_size_)} * block_size_ + position % block_size_;
}

std::vector<int32_t> BlockTable::SlotRow(int64_t row, int64_t length) const {
  std::vector<int32_t> slots(static_cast<size_t>(length));
  for (int64_t pos = 0; pos < length; ++pos) slots[pos] = static_cast<int32_t>(SlotAt(row, pos));
  return slots;
}

void BlockTable::Upload() {
  if (dirty_.empty()) return;
  const int64_t row_bytes = max_blocks_ * static_cast<int64_t>(sizeof(int32_t));
  for (int64_t row = 0; row < num_rows_; ++row) {
    if (!dirty_[row]) continue;
    runtime::CopyBytesAsync(device_buffer_.data_as<int32_t>() + row * max_blocks_,
                            host_.data() + row * max_blocks_, row_bytes, device_, stream_);
    dirty_[row] = false;
  }
}

TensorView BlockTable::View() const {
  return TensorView(device_buffer_.data_as<int32_t>(), DType::kInt32, device_,
                    {num_rows_, max_blocks_});
}

}  // namespace kvcanary::sim
