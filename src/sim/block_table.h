// The paged layout (--block-size N > 0), as vLLM keeps it: the pool's slots are grouped into
// blocks of N consecutive slots (block b holds slots [b * N, (b + 1) * N); block 0 holds the
// padding slot and is never handed out), and each running request has a row of block ids,
// block_table[row, i] = the block of its positions [i * N, (i + 1) * N). The slot of (row,
// position) is block_table[row, position / N] * N + position % N.
//
// The blocks are handed out by a SlotAllocator over block ids (its LIFO reuse and its refusal of
// a double free are what a block allocator needs too); this header has the table and the
// arithmetic between slots and blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "kvcanary/tensor.h"

namespace kvcanary::sim {

// ceil(tokens / block_size): the blocks that positions [0, tokens) span. REQUIRES: tokens >= 0,
// block_size >= 1.
int64_t BlocksSpanning(int64_t tokens, int64_t block_size);

// The blocks of a list of slots that covers whole blocks, in the order their first slots appear
// (slot b * N is block b). Throws std::logic_error when the slots are not whole blocks, each
// listed once: the caller frees blocks, and half a block cannot be freed.
std::vector<int64_t> WholeBlocksOf(const std::vector<int64_t>& slots, int64_t block_size);

// Thread safety: none.
//
// Invariants: the host copy is authoritative; edits go there and Upload() makes the device copy
// equal (on the CPU the two are the same memory). Every entry past a row's blocks is 0 (the
// padding block), and so is every entry of a cleared row. Rows are the req_to_token rows of the
// same requests: the scheduler hands them out, this table only holds them.
class BlockTable {
 public:
  // int32 [num_rows, max_blocks]. REQUIRES: num_rows >= 1, max_blocks >= 1, block_size >= 1
  // (kvcanary::Error otherwise).
  BlockTable(Device device, int64_t num_rows, int64_t max_blocks, int64_t block_size,
             StreamHandle stream);
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  int64_t num_rows() const { return num_rows_; }
  int64_t max_blocks() const { return max_blocks_; }
  int64_t block_size() const { return block_size_; }

  // Host edits. REQUIRES (std::out_of_range otherwise): 1 <= row < num_rows (row 0 is the
  // padding row and stays zero), 0 <= index < max_blocks.
  void Set(int64_t row, int64_t index, int64_t block);
  int32_t Get(int64_t row, int64_t index) const;
  // Zeroes the row (a request left it).
  void ClearRow(int64_t row);
  // The slot the table maps (row, position) to.
  int64_t SlotAt(int64_t row, int64_t position) const;
  // The slots of positions [0, length) of a row, as attention reads them.
  std::vector<int32_t> SlotRow(int64_t row, int64_t length) const;

  // Copies the rows edited since the last Upload to the device, ordered on the stream (CPU:
  // nothing to do).
  void Upload();
  // The device table: int32 [num_rows, max_blocks], contiguous.
  TensorView View() const;

 private:
  int32_t* host_data() const;
  void CheckEntry(int64_t row, int64_t index) const;
  void MarkDirty(int64_t row);

  Device device_;
  int64_t num_rows_;
  int64_t max_blocks_;
  int64_t block_size_;
  StreamHandle stream_;
  runtime::DeviceBuffer device_buffer_;
  std::vector<int32_t> host_;   // CUDA only: the host copy; on the CPU the device buffer is it
  std::vector<bool> dirty_;     // per row, CUDA only
};

}  // namespace kvcanary::sim
