// The engine's req_to_token table: int32 [max_running_reqs + 1, max_context_len], row r position p
// = the KV slot of request row r's token at p. Row 0 is the padding row (all zeros, never handed
// out), as in SGLang's ReqToTokenPool, so padded batch entries read slot 0.
//
// The table may live inside a wider parent table (a data-parallel shard: `row_pitch` >
// max_context_len), which is what the `stride_view` fault needs: View() then has
// stride(0) == row_pitch while an engine that hard-codes the old stride passes max_context_len.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "kvcanary/tensor.h"

namespace kvcanary::sim {

// Thread safety: none.
//
// Invariants: the host copy is authoritative; edits go there and Upload() makes the device copy
// equal (on the CPU the two are the same memory and Upload() does nothing). Row 0 and every free
// row hold zeros. Columns [max_context_len, row_pitch) of the parent stay zero.
class ReqToTokenTable {
 public:
  // REQUIRES: max_running_reqs >= 1, max_context_len >= 1, row_pitch == 0 (meaning
  // max_context_len) or row_pitch >= max_context_len. Throws kvcanary::Error otherwise.
  ReqToTokenTable(Device device, int64_t max_running_reqs, int64_t max_context_len,
                  StreamHandle stream, int64_t row_pitch = 0);
  ReqToTokenTable(const ReqToTokenTable&) = delete;
  ReqToTokenTable& operator=(const ReqToTokenTable&) = delete;

  int64_t num_rows() const { return num_rows_; }  // max_running_reqs + 1
  int64_t width() const { return width_; }        // max_context_len
  int64_t row_pitch() const { return row_pitch_; }
  Device device() const { return device_; }

  // A row in 1..max_running_reqs, or nullopt when all are taken. LIFO: the row freed last is
  // handed out first. The row is all zeros.
  std::optional<int64_t> AllocateRow();
  // Zeroes the row (host, and the device at the next Upload) and returns it to the free list.
  // REQUIRES: the row is allocated; throws std::logic_error otherwise.
  void FreeRow(int64_t row);
  int64_t NumFreeRows() const { return static_cast<int64_t>(free_rows_.size()); }
  bool IsRowAllocated(int64_t row) const;

  // Host edits. REQUIRES (std::out_of_range otherwise): 0 <= pos < width(), and row in range; Set
  // also requires the row to be allocated (row 0 stays zero).
  void Set(int64_t row, int64_t pos, int64_t slot);
  // Sets positions [pos, pos + slots.size()) of `row`.
  void SetRange(int64_t row, int64_t pos, const std::vector<int64_t>& slots);
  int32_t Get(int64_t row, int64_t pos) const;
  // The host row (width() entries); valid for the table's life.
  const int32_t* HostRow(int64_t row) const;
  // The host parent table: num_rows() rows of row_pitch() entries.
  const int32_t* HostData() const { return host_data(); }
  // Mutable host row, for fault injection that must bypass Set's checks (marks the row dirty).
  int32_t* MutableHostRow(int64_t row);

  // Moves the table into a parent of width `row_pitch` (the `stride_view` fault: the table
  // becomes a slice of a wider one), keeping every entry; the new parent columns are zero. CUDA:
  // uploads the whole table and waits. Invalidates earlier views and host pointers.
  // REQUIRES: row_pitch >= width() (kvcanary::Error otherwise).
  void SetRowPitch(int64_t row_pitch);

  // Copies the rows edited since the last Upload to the device, ordered on the stream (CPU:
  // nothing to do).
  void Upload();

  // The device table: int32 [num_rows, width] with strides (row_pitch, 1).
  TensorView View() const;
  // The whole parent table: int32 [num_rows, row_pitch], contiguous.
  TensorView WiderView() const;
  // The table read with a wrong row stride (the `wrong_stride_read` fault): int32
  // [rows, width] with strides (row_stride, 1) over the same memory, where rows is as many as
  // fit in the parent allocation (at most num_rows). REQUIRES: row_stride >= 1.
  TensorView ViewWithRowStride(int64_t row_stride) const;

 private:
  int32_t* host_data() const;
  int32_t* device_data() const { return device_buffer_.data_as<int32_t>(); }
  void CheckRow(int64_t row) const;
  void MarkDirty(int64_t row);
  bool on_cuda() const { return device_.type == DeviceType::kCUDA; }

  Device device_;
  int64_t num_rows_;
  int64_t width_;
  int64_t row_pitch_;
  StreamHandle stream_;
  runtime::DeviceBuffer device_buffer_;
  // CUDA only: the host copy (num_rows * row_pitch). On the CPU the device buffer is the host copy.
  std::vector<int32_t> host_;
  std::vector<int64_t> free_rows_;  // a stack, back handed out next
  std::vector<bool> allocated_;
  std::vector<bool> dirty_;
  std::vector<int64_t> dirty_rows_;
};

}  // namespace kvcanary::sim
