#include "runtime/token_table.h"

#include <algorithm>
#include <cstring>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime {
namespace {

void CheckTableTensor(const TensorView& table, const char* name, bool int64_allowed) {
  const bool dtype_ok =
      table.dtype() == DType::kInt32 || (int64_allowed && table.dtype() == DType::kInt64);
  if (table.ndim() != 2 || !dtype_ok) {
    ThrowError("kv-canary: ", name, " must be a 2-D ", int64_allowed ? "int32 or int64" : "int32",
               " tensor, got ", table.ndim(), "-D ", DTypeName(table.dtype()));
  }
}

TokenTable TableOf(const TensorView& req_to_token, const TensorView& block_table,
                   int64_t block_size) {
  TokenTable table;
  table.req_to_token = req_to_token;
  table.block_table = block_table;
  table.block_size = block_size;
  table.rows = table.tensor().size(0);
  table.max_seq_len = CheckedMul("block_table width x block_size", table.tensor().size(1),
                                 block_size);
  return table;
}

}  // namespace

TokenTable InstallTokenTable(const InstallArgs& args) {
  if (args.req_to_token.defined() == args.block_table.defined()) {
    ThrowError("kv-canary: install needs exactly one of req_to_token and block_table, got ",
               args.req_to_token.defined() ? "both" : "neither");
  }
  if (args.req_to_token.defined()) {
    CheckTableTensor(args.req_to_token, "req_to_token", /*int64_allowed=*/false);
    if (args.block_size != 1) {
      ThrowError("kv-canary: block_size must be 1 with req_to_token (a per-token table), got ",
                 args.block_size);
    }
    return TableOf(args.req_to_token, TensorView(), 1);
  }
  CheckTableTensor(args.block_table, "block_table", /*int64_allowed=*/true);
  CheckInRange<int64_t>("block_size", args.block_size, 1, kMaxBlockSize);
  if (args.pool_slot_count % args.block_size != 0) {
    ThrowError("kv-canary: block_size=", args.block_size, " must divide pool_slot_count=",
               args.pool_slot_count, " (the pool is whole blocks)");
  }
  return TableOf(TensorView(), args.block_table, args.block_size);
}

TokenTable ForwardTokenTable(const TokenTable& installed, const ForwardBatch& batch) {
  const TensorView& other = installed.paged() ? batch.req_to_token : batch.block_table;
  if (other.defined()) {
    ThrowError("kv-canary: forward_batch.", installed.paged() ? "req_to_token" : "block_table",
               " given, but the runtime was installed with ",
               installed.paged() ? "block_table" : "req_to_token", "; pass that kind");
  }
  if (installed.paged() && batch.req_to_token_stride0.has_value()) {
    ThrowError("kv-canary: forward_batch.req_to_token_stride0 given, but the runtime was "
               "installed with block_table (the pitch check applies to req_to_token)");
  }
  const TensorView& override_table = installed.paged() ? batch.block_table : batch.req_to_token;
  if (!override_table.defined()) return installed;
  CheckTableTensor(override_table, installed.paged() ? "forward_batch.block_table"
                                                     : "forward_batch.req_to_token",
                   installed.paged());
  return installed.paged() ? TableOf(TensorView(), override_table, installed.block_size)
                           : TableOf(override_table, TensorView(), 1);
}

void CheckHostBlocks(const TokenTable& table, int64_t pool_slot_count,
                     const ForwardHostInput& host) {
  if (!table.paged()) {
    if (!host.block_ids.empty()) {
      ThrowError("kv-canary: host block_ids given, but the runtime was installed with "
                 "req_to_token (per-token slots, no blocks)");
    }
    return;
  }
  const size_t rows = std::min(host.prefix_lens.size(), host.extend_seq_lens.size());
  const int64_t pool_blocks = pool_slot_count / table.block_size;
  int64_t needed = 0;
  for (size_t r = 0; r < rows; ++r) {
    const int64_t length = std::max<int64_t>(
        CheckedAdd("prefix_len + extend_len", host.prefix_lens[r], host.extend_seq_lens[r]), 0);
    if (length > table.max_seq_len) {
      ThrowError("kv-canary: batch row ", r, " needs ", length, " positions but block_table holds ",
                 table.max_seq_len, " (", table.tensor().size(1), " blocks of ", table.block_size,
                 ")");
    }
    needed += (length + table.block_size - 1) / table.block_size;
  }
  if (host.block_ids.empty()) return;
  if (static_cast<int64_t>(host.block_ids.size()) != needed) {
    ThrowError("kv-canary: host block_ids must hold the ", needed,
               " blocks the batch's lengths need, got ", host.block_ids.size());
  }
  for (size_t i = 0; i < host.block_ids.size(); ++i) {
    if (host.block_ids[i] < 0 || host.block_ids[i] >= pool_blocks) {
      ThrowError("kv-canary: host block_ids[", i, "]=", host.block_ids[i],
                 " is outside the pool's blocks [0, ", pool_blocks, ")");
    }
  }
}

void SetPlanTable(const TokenTable& table, PlanInputs& inputs) {
  inputs.req_to_token = table.req_to_token;
  inputs.block_table = table.block_table;
  inputs.block_size = table.block_size;
}

char* ElementAddress(const TensorView& view, int64_t row, int64_t col) {
  const int64_t col_stride = view.ndim() >= 2 ? view.stride(1) : 0;
  return static_cast<char*>(view.data()) +
         (row * view.stride(0) + col * col_stride) * ItemSize(view.dtype());
}

namespace {

// Enqueues the copy of a row's first `columns` entries into `bytes`.
void EnqueueRowCopy(const TensorView& tensor, int64_t row, int64_t columns,
                    std::vector<char>& bytes, StreamHandle stream) {
  const int64_t item = ItemSize(tensor.dtype());
  bytes.resize(columns * item);
  if (columns == 0) return;
  if (tensor.stride(1) == 1) {
    CopyBytesAsync(bytes.data(), ElementAddress(tensor, row, 0), columns * item, tensor.device(),
                   stream);
    return;
  }
  for (int64_t c = 0; c < columns; ++c) {
    CopyBytesAsync(bytes.data() + c * item, ElementAddress(tensor, row, c), item,
                   tensor.device(), stream);
  }
}

int64_t EntryAt(const std::vector<char>& bytes, int64_t column, int64_t item) {
  if (item == 4) {
    int32_t narrow = 0;
    std::memcpy(&narrow, bytes.data() + column * 4, 4);
    return narrow;
  }
  int64_t wide = 0;
  std::memcpy(&wide, bytes.data() + column * 8, 8);
  return wide;
}

}  // namespace

std::vector<TableRowSpan> LiveRowSpans(const TokenTable& table, const ForwardHostInput& host) {
  const size_t rows = std::min(
      {host.req_pool_indices.size(), host.prefix_lens.size(), host.extend_seq_lens.size()});
  std::vector<TableRowSpan> spans;
  for (size_t r = 0; r < rows; ++r) {
    const int64_t row = host.req_pool_indices[r];
    if (row == kReqPoolIdxPadding || row < 0 || row >= table.rows) continue;
    const int64_t length = SaturatingAdd(host.prefix_lens[r], host.extend_seq_lens[r]);
    spans.push_back({row, std::clamp<int64_t>(length, 0, table.max_seq_len)});
  }
  return spans;
}

std::vector<std::vector<int64_t>> ReadTableSlots(const TokenTable& table,
                                                 const std::vector<TableRowSpan>& spans,
                                                 StreamHandle stream) {
  const TensorView& tensor = table.tensor();
  const int64_t block = table.block_size;
  std::vector<std::vector<char>> bytes(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    EnqueueRowCopy(tensor, spans[i].row, (spans[i].length + block - 1) / block, bytes[i], stream);
  }
  if (!spans.empty()) SynchronizeStream(tensor.device(), stream);
  std::vector<std::vector<int64_t>> slots(spans.size());
  const int64_t item = ItemSize(tensor.dtype());
  for (size_t i = 0; i < spans.size(); ++i) {
    slots[i].resize(spans[i].length);
    for (int64_t p = 0; p < spans[i].length; ++p) {
      slots[i][p] = EntryAt(bytes[i], p / block, item) * block + p % block;
    }
  }
  return slots;
}

}  // namespace kvcanary::runtime
