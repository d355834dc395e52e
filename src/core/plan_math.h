// Per-row arithmetic of the plan operation, shared by both backends.
// Index arithmetic wraps (two's complement): only invalid inputs reach the wrap, and wrapping keeps
// it defined. Every read is clamped (D3, D4, D7), so no input can read out of bounds.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/sample_math.h"
#include "core/verify_entry.h"
#include "core/wrap.h"
#include "kvcanary/hash.h"

namespace kvcanary {

// The slot of clamped position `col` in a block table whose row starts at element `base`:
// block id * block_size + offset in the block. An id of an invalid table wraps, never traps.
KVC_HOST_DEVICE int64_t ReadPagedSlot(const ReqToTokenParams& table, int64_t base, int64_t col) {
  int64_t block = 0;
  int64_t offset = 0;
  if (table.block_shift >= 0) {
    block = col >> table.block_shift;
    offset = col & (table.block_size - 1);
  } else {
    block = col / table.block_size;
    offset = col - block * table.block_size;
  }
  const int64_t id = table.data64 != nullptr ? table.data64[base + block]
                                             : static_cast<int64_t>(table.data[base + block]);
  return WrapAdd(WrapMul(id, table.block_size), offset);
}

// rt(row, col) with row and column clamped: the slot of position `col` of table row `row`. A block
// table clamps the position to its rows' max_blocks * block_size positions, so it reads exactly
// as the req_to_token it describes, invalid positions included. An empty table reads as slot 0
// (skipped by verify).
KVC_HOST_DEVICE int64_t ReadReqToToken(const ReqToTokenParams& table, int64_t row, int64_t col) {
  if (table.rows <= 0 || table.width <= 0) return 0;
  const int64_t base = ClampIndex(row, table.rows) * table.row_stride;
  if (!table.paged) return table.data[base + ClampIndex(col, table.width)];
  return ReadPagedSlot(table, base, ClampIndex(col, table.width));
}

// tr(x): negative values pass through; an index past the table clamps to its last entry (D3).
KVC_HOST_DEVICE int64_t TranslateSlot(const SwaLutParams& lut, int64_t slot) {
  if (lut.len <= 0 || slot < 0) return slot;
  return lut.data[slot < lut.len ? slot : lut.len - 1];
}

// The first verified position: max(p - W, 0) for an SWA group, 0 otherwise.
KVC_HOST_DEVICE int64_t WindowStart(int64_t prefix_len, int64_t window) {
  if (window <= 0) return 0;
  const int64_t start = WrapSub(prefix_len, window);
  return start > 0 ? start : 0;
}

// What one batch row contributes to the plan.
struct RowPlan {
  int64_t req_pool_index = 0;
  int64_t window_start = 0;
  int64_t verify_len = 0;
  int64_t write_len = 0;
  int64_t seed_slot = -1;
};

KVC_HOST_DEVICE RowPlan PlanRow(const PlanInputParams& in, int64_t r) {
  RowPlan row;
  // The row's three inputs load together (a padding row's lengths are read and unused): on the
  // GPU each dependent read is a memory latency on the step's critical path.
  const int64_t req_pool_index = in.req_pool_indices[r];
  const int64_t prefix_len = in.prefix_lens[r];
  const int64_t extend_len = in.extend_seq_lens != nullptr ? in.extend_seq_lens[r] : 0;
  row.req_pool_index = req_pool_index;
  if (row.req_pool_index == kReqPoolIdxPadding) return row;
  row.window_start = WindowStart(prefix_len, in.swa_window_size);
  const int64_t verify_len = WrapSub(prefix_len, row.window_start);
  row.verify_len = verify_len > 0 ? verify_len : 0;
  if (in.verify_sample > 1) {
    row.verify_len = SamplePositions(row.window_start, prefix_len, in.verify_sample,
                                     SampleResidue(in, row.req_pool_index))
                         .Count();
  }
  row.write_len = extend_len > 0 ? extend_len : 0;
  if (prefix_len > 0 && row.write_len > 0) {
    row.seed_slot = TranslateSlot(
        in.lut, ReadReqToToken(in.req_to_token, row.req_pool_index, WrapSub(prefix_len, 1)));
  }
  return row;
}

// The expected token of (batch row r, position): -1 without a pool or outside its valid range.
KVC_HOST_DEVICE int64_t ExpectedToken(const TokenPoolParams& pool, int64_t r, int64_t rp,
                                      int64_t position) {
  if (pool.data == nullptr) return -1;
  const int64_t q = WrapAdd(position, pool.position_offset);
  if (q < 0 || q >= pool.valid_lens[r] || q >= pool.width || rp < 0 || rp >= pool.rows) return -1;
  return pool.data[rp * pool.row_stride + q];
}

// The slot, predecessor and position of (req_to_token row rp, position); the expected token is
// left -1 (ExpectedToken gives it). known_prev_slot, when given, is the slot of (rp, position - 1)
// already derived, so the table is not read twice.
KVC_HOST_DEVICE VerifyEntry DeriveVerifyEntry(const PlanInputParams& in, int64_t rp,
                                              int64_t position,
                                              const int64_t* known_prev_slot = nullptr) {
  VerifyEntry entry;
  entry.slot = TranslateSlot(in.lut, ReadReqToToken(in.req_to_token, rp, position));
  if (position <= 0) {
    entry.prev_slot = -1;
  } else if (known_prev_slot != nullptr) {
    entry.prev_slot = *known_prev_slot;
  } else {
    entry.prev_slot =
        TranslateSlot(in.lut, ReadReqToToken(in.req_to_token, rp, WrapSub(position, 1)));
  }
  entry.position = position;
  return entry;
}

// Stores the verify entry of (batch row r, position) at index `entry`.
KVC_HOST_DEVICE void StoreVerifyEntry(const PlanInputParams& in, const VerifyPlanOutParams& out,
                                      int64_t entry, int64_t r, int64_t rp, int64_t position) {
  const VerifyEntry derived = DeriveVerifyEntry(in, rp, position);
  out.slot_indices[entry] = derived.slot;
  out.prev_slot_indices[entry] = derived.prev_slot;
  out.expected_positions[entry] = position;
  out.expected_tokens[entry] = ExpectedToken(in.pool, r, rp, position);
}

// The batch row of verify entry e among rows [lo, hi): the largest r there with scratch[r] <= e,
// lo when none (or the range is empty). With lo = 0 and hi = bs: the row of e (empty rows never
// win; row 0 when none). scratch is non-decreasing as stage 1 writes it.
KVC_HOST_DEVICE int64_t RowOfEntryIn(const int64_t* scratch, int64_t lo, int64_t hi, int64_t e) {
  while (hi - lo > 1) {  // answer in [lo, hi)
    const int64_t mid = lo + (hi - lo) / 2;
    if (scratch[mid] <= e)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// The batch row of verify entry e. REQUIRES bs >= 1.
KVC_HOST_DEVICE int64_t RowOfEntry(const int64_t* scratch, int64_t bs, int64_t e) {
  return RowOfEntryIn(scratch, 0, bs, e);
}

// The row entry e would lie in if every row had the same length: e * bs / total, clamped to a
// row. In doubles: exact for e * bs < 2^53 and never overflows. Only a hint: LocateRow checks it
// against the offsets. REQUIRES bs >= 1, total > 0, e >= 0.
KVC_HOST_DEVICE int64_t GuessRow(int64_t bs, int64_t total, int64_t e) {
  const double quotient =
      static_cast<double>(e) * static_cast<double>(bs) / static_cast<double>(total);
  return quotient >= static_cast<double>(bs - 1) ? bs - 1 : static_cast<int64_t>(quotient);
}

// A batch row as the fused verify finds an entry's: its index, its first entry (scratch[r]) and
// its plan inputs.
struct LocatedRow {
  int64_t r = 0;
  int64_t begin = 0;
  int64_t prefix_len = 0;
  int64_t rp = 0;
};

// Up to this many rows the search needs at most two reads (a one-row batch none) and is used
// instead of the guess: the guess's reads measured a microsecond slower on a decode-1 step.
inline constexpr int64_t kSearchedBatchRows = 4;

// The row of entry e with its inputs. total = scratch[bs], read once per launch by the caller.
// Up to kSearchedBatchRows rows (or with no total to divide by) RowOfEntry's search; above, the
// row every entry would lie in were all rows equal (GuessRow), whose bounds and inputs do not
// depend on one another and so load in one step: a batch of equal rows (a decode batch) reaches
// its rows' inputs one dependent read after the total, where the search and then the inputs took
// log2(bs) + 1. A wrong guess searches from there and reloads. On non-decreasing offsets the row
// is RowOfEntry's; on any offsets it is the one the kernel found before the inputs were loaded
// with the bounds. REQUIRES bs >= 1.
KVC_HOST_DEVICE LocatedRow LocateRow(const int64_t* scratch, const PlanInputParams& in,
                                     int64_t total, int64_t e) {
  const int64_t bs = in.bs;
  if (bs <= kSearchedBatchRows || total <= 0 || e < 0) {
    const int64_t r = RowOfEntry(scratch, bs, e);
    return LocatedRow{r, scratch[r], in.prefix_lens[r], in.req_pool_indices[r]};
  }
  const int64_t guess = GuessRow(bs, total, e);
  LocatedRow row{guess, scratch[guess], in.prefix_lens[guess], in.req_pool_indices[guess]};
  const int64_t next = scratch[guess + 1];  // scratch holds bs + 1 offsets
  if (row.begin <= e && (guess + 1 == bs || next > e)) return row;
  row.r =
      row.begin > e ? RowOfEntryIn(scratch, 0, guess, e) : RowOfEntryIn(scratch, guess + 1, bs, e);
  row.begin = scratch[row.r];
  row.prefix_len = in.prefix_lens[row.r];
  row.rp = in.req_pool_indices[row.r];
  return row;
}

// Where batch row r's verified positions lie: what locating its j-th entry needs, derived once
// per row (a walk over a row's entries reuses it).
struct RowPositions {
  int64_t start = 0;         // the first verified position
  int64_t end = 0;           // prefix_len
  SampledPositions sampled;  // with sampled verify
};

// The verified positions of a row whose prefix is prefix_len, in req_to_token row rp.
KVC_HOST_DEVICE RowPositions RowPositionsOf(const PlanInputParams& in, int64_t prefix_len,
                                            int64_t rp) {
  RowPositions row;
  row.end = prefix_len;
  row.start = WindowStart(row.end, in.swa_window_size);
  if (in.verify_sample > 1) {
    row.sampled = SamplePositions(row.start, row.end, in.verify_sample, SampleResidue(in, rp));
  }
  return row;
}

KVC_HOST_DEVICE RowPositions RowPositionsOf(const PlanInputParams& in, int64_t r) {
  // rp matters only to a sampled row's phase
  return RowPositionsOf(in, in.prefix_lens[r], in.verify_sample > 1 ? in.req_pool_indices[r] : 0);
}

// The position of the row's j-th entry: its first verified position plus j, or with sampled
// verify its j-th sampled position.
KVC_HOST_DEVICE int64_t PositionInRow(const PlanInputParams& in, const RowPositions& row,
                                      int64_t j) {
  if (in.verify_sample <= 1) return WrapAdd(row.start, j);
  return SampledPosition(row.sampled, row.end, in.verify_sample, j);
}

// The position of entry e in row r (whose entries begin at scratch[r]).
KVC_HOST_DEVICE int64_t EntryPosition(const PlanInputParams& in, const int64_t* scratch, int64_t r,
                                      int64_t e) {
  return PositionInRow(in, RowPositionsOf(in, r), WrapSub(e, scratch[r]));
}

}  // namespace kvcanary
