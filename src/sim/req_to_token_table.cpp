#include "sim/req_to_token_table.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"

namespace kvcanary::sim {

ReqToTokenTable::ReqToTokenTable(Device device, int64_t max_running_reqs, int64_t max_context_len,
                                 StreamHandle stream, int64_t row_pitch)
    : device_(device),
      num_rows_(CheckedAdd("req_to_token rows (max_running_reqs + 1)", max_running_reqs, 1)),
      width_(max_context_len),
      row_pitch_(row_pitch == 0 ? max_context_len : row_pitch),
      stream_(stream) {
  if (max_running_reqs < 1) {
    ThrowError("kv-canary sim: max_running_reqs: expected >= 1, got ", max_running_reqs);
  }
  if (max_context_len < 1) {
    ThrowError("kv-canary sim: max_context_len: expected >= 1, got ", max_context_len);
  }
  if (row_pitch_ < width_) {
    ThrowError("kv-canary sim: req_to_token row pitch: expected >= ", width_, ", got ", row_pitch);
  }
  const int64_t entries =
      CheckedMul("req_to_token entries (rows x row pitch)", num_rows_, row_pitch_);
  device_buffer_ = runtime::DeviceBuffer(
      device, CheckedMul("req_to_token bytes", entries, static_cast<int64_t>(sizeof(int32_t))));
  if (on_cuda()) host_.assign(static_cast<size_t>(entries), 0);
  allocated_.assign(static_cast<size_t>(num_rows_), false);
  dirty_.assign(static_cast<size_t>(num_rows_), false);
  // Pushed in reverse so that a fresh table hands out rows 1, 2, 3, ...
  for (int64_t row = num_rows_ - 1; row >= 1; --row) free_rows_.push_back(row);
}

int32_t* ReqToTokenTable::host_data() const {
  if (on_cuda()) return const_cast<int32_t*>(host_.data());
  return device_data();
}

void ReqToTokenTable::CheckRow(int64_t row) const {
  if (row < 0 || row >= num_rows_) {
    throw std::out_of_range("kv-canary sim: req_to_token row " + std::to_string(row) +
                            " outside [0, " + std::to_string(num_rows_) + ")");
  }
}

void ReqToTokenTable::MarkDirty(int64_t row) {
  if (!on_cuda() || dirty_[row]) return;
  dirty_[row] = true;
  dirty_rows_.push_back(row);
}

std::optional<int64_t> ReqToTokenTable::AllocateRow() {
  if (free_rows_.empty()) return std::nullopt;
  const int64_t row = free_rows_.back();
  free_rows_.pop_back();
  allocated_[row] = true;
  return row;
}

void ReqToTokenTable::FreeRow(int64_t row) {
  CheckRow(row);
  if (!allocated_[row]) {
    throw std::logic_error("kv-canary sim: req_to_token row " + std::to_string(row) +
                           " freed while not allocated");
  }
  // Zeroed so that a reader of a stale row sees padding, never another request's old slots.
  std::fill_n(host_data() + row * row_pitch_, width_, 0);
  MarkDirty(row);
  allocated_[row] = false;
  free_rows_.push_back(row);
}

bool ReqToTokenTable::IsRowAllocated(int64_t row) const {
  return row >= 0 && row < num_rows_ && allocated_[row];
}

void ReqToTokenTable::Set(int64_t row, int64_t pos, int64_t slot) {
  CheckRow(row);
  if (!allocated_[row]) {
    throw std::logic_error("kv-canary sim: req_to_token row " + std::to_string(row) +
                           " written while not allocated");
  }
  if (pos < 0 || pos >= width_) {
    throw std::out_of_range("kv-canary sim: req_to_token position " + std::to_string(pos) +
                            " outside [0, " + std::to_string(width_) + ")");
  }
  host_data()[row * row_pitch_ + pos] = static_cast<int32_t>(slot);
  MarkDirty(row);
}

void ReqToTokenTable::SetRange(int64_t row, int64_t pos, const std::vector<int64_t>& slots) {
  for (size_t i = 0; i < slots.size(); ++i) Set(row, pos + static_cast<int64_t>(i), slots[i]);
}

int32_t ReqToTokenTable::Get(int64_t row, int64_t pos) const {
  CheckRow(row);
  if (pos < 0 || pos >= width_) {
    throw std::out_of_range("kv-canary sim: req_to_token position " + std::to_string(pos) +
                            " outside [0, " + std::to_string(width_) + ")");
  }
  return host_data()[row * row_pitch_ + pos];
}

const int32_t* ReqToTokenTable::HostRow(int64_t row) const {
  CheckRow(row);
  return host_data() + row * row_pitch_;
}

int32_t* ReqToTokenTable::MutableHostRow(int64_t row) {
  CheckRow(row);
  MarkDirty(row);
  return host_data() + row * row_pitch_;
}

void ReqToTokenTable::SetRowPitch(int64_t row_pitch) {
  if (row_pitch < width_) {
    ThrowError("kv-canary sim: req_to_token row pitch: expected >= ", width_, ", got ", row_pitch);
  }
  if (row_pitch == row_pitch_) return;
  const int64_t entries = num_rows_ * row_pitch;
  std::vector<int32_t> relaid(static_cast<size_t>(entries), 0);
  for (int64_t row = 0; row < num_rows_; ++row) {
    std::copy_n(host_data() + row * row_pitch_, width_, relaid.data() + row * row_pitch);
  }
  runtime::DeviceBuffer buffer(device_, entries * static_cast<int64_t>(sizeof(int32_t)));
  row_pitch_ = row_pitch;
  device_buffer_ = std::move(buffer);
  if (!on_cuda()) {
    std::copy(relaid.begin(), relaid.end(), device_data());
    return;
  }
  host_ = std::move(relaid);
  runtime::CopyBytesAsync(device_data(), host_.data(),
                          entries * static_cast<int64_t>(sizeof(int32_t)), device_, stream_);
  runtime::SynchronizeStream(device_, stream_);
  for (int64_t row : dirty_rows_) dirty_[row] = false;
  dirty_rows_.clear();
}

void ReqToTokenTable::Upload() {
  if (!on_cuda()) return;
  // Rows are uploaded one by one: a decode step dirties a few scattered rows, and the copy of a
  // row is small, so this beats copying the whole table every step.
  std::sort(dirty_rows_.begin(), dirty_rows_.end());
  for (int64_t row : dirty_rows_) {
    runtime::CopyBytesAsync(device_data() + row * row_pitch_, host_.data() + row * row_pitch_,
                            width_ * static_cast<int64_t>(sizeof(int32_t)), device_, stream_);
    dirty_[row] = false;
  }
  dirty_rows_.clear();
}

TensorView ReqToTokenTable::View() const {
  return TensorView(device_data(), DType::kInt32, device_, {num_rows_, width_}, {row_pitch_, 1});
}

TensorView ReqToTokenTable::WiderView() const {
  return TensorView(device_data(), DType::kInt32, device_, {num_rows_, row_pitch_});
}

TensorView ReqToTokenTable::ViewWithRowStride(int64_t row_stride) const {
  if (row_stride < 1) {
    throw std::logic_error("kv-canary sim: row stride must be positive, got " +
                           std::to_string(row_stride));
  }
  // Row r spans [r * stride, r * stride + width): keep the rows that end inside the parent.
  const int64_t entries = num_rows_ * row_pitch_;
  const int64_t rows = std::min(num_rows_, (entries - width_) / row_stride + 1);
  return TensorView(device_data(), DType::kInt32, device_, {rows, width_}, {row_stride, 1});
}

}  // namespace kvcanary::sim
