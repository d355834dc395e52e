// The table that locates a request's tokens, as the runtime holds it: SGLang's per-token
// req_to_token or a paged block table. Install checks it once; each step checks the forward's
// override and the host's lengths and block ids against it, before anything runs.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/plan.h"
#include "kvcanary/runtime/canary_manager.h"

namespace kvcanary::runtime {

struct TokenTable {
  TensorView req_to_token;
  TensorView block_table;
  int64_t block_size = 1;
  int64_t rows = 0;
  int64_t max_seq_len = 0;  // positions a row can hold: width x block_size

  bool paged() const { return block_table.defined(); }
  const TensorView& tensor() const { return paged() ? block_table : req_to_token; }
};

// The install's table. Throws kv-canary errors: neither or both given, a wrong dtype or rank,
// block_size outside [1, kMaxBlockSize] (or not 1 with req_to_token), one that does not divide
// pool_slot_count, or width x block_size past int64.
TokenTable InstallTokenTable(const InstallArgs& args);

// The table a forward reads: the batch's override (same kind as the install's) or the install's.
// Throws when the batch overrides with the other kind.
TokenTable ForwardTokenTable(const TokenTable& installed, const ForwardBatch& batch);

// Block tables: every row's prefix_len + extend_len fits the table's max_seq_len, and the
// host block ids, when given, number what those lengths need and lie in [0, pool_blocks).
void CheckHostBlocks(const TokenTable& table, int64_t pool_slot_count,
                     const ForwardHostInput& host);

// The byte address of element [row, col] of a view (`col` ignored for a 1-D view).
char* ElementAddress(const TensorView& view, int64_t row, int64_t col);

// The first `length` positions of a table row.
struct TableRowSpan {
  int64_t row = 0;
  int64_t length = 0;
};

// A forward's live rows as spans of `table`: the rows its host columns (req_pool_indices,
// prefix_lens, extend_seq_lens) have in common, padding and rows outside the table skipped, each
// length prefix_len + extend_len clamped to [0, the table's max_seq_len]. An engine's bad host
// input is never read past the table.
std::vector<TableRowSpan> LiveRowSpans(const TokenTable& table, const ForwardHostInput& host);

// For each span, the full-pool slot of each of its positions as `table` holds it (a block
// table's entry is a block: slot = block x block_size + position % block_size), read from the
// table's device on `stream`: one copy per row (per entry when a row is not contiguous) and one
// synchronisation. REQUIRES: each span inside the table.
std::vector<std::vector<int64_t>> ReadTableSlots(const TokenTable& table,
                                                 const std::vector<TableRowSpan>& spans,
                                                 StreamHandle stream);

// Sets the plan inputs' table fields from `table`.
void SetPlanTable(const TokenTable& table, PlanInputs& inputs);

}  // namespace kvcanary::runtime
