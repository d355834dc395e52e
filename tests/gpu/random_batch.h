// The random batch of a differential-sweep case (random_inputs.h builds the rest of the step on
// it): live and padding rows with their lengths and tokens, the req_to_token table (or a paged
// block table and the req_to_token it implies) and the SWA LUT, drawn from a SweepCase's knobs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "sweep_case.h"
#include "testutil.h"

namespace kvcanary::testing::sweep_internal {

// The batch and the world it lives in.
struct Batch {
  std::vector<int64_t> rp, prefix, extend;
  std::vector<std::vector<int64_t>> tokens;      // tokens[r][pos], live rows only
  HostTensor<int32_t> table;                     // req_to_token
  std::optional<HostTensor<int64_t>> block_ids;  // the paged block table that describes it
  std::optional<HostTensor<int64_t>> lut;
  int64_t num_slots = 0;  // of the canary buffer (the SWA pool's with a LUT)
};

// req_to_token[row, col] (HostTensor::at is for writing).
inline int64_t Rt(const HostTensor<int32_t>& table, int64_t row, int64_t col) {
  return table[row * table.shape()[1] + col];
}

// tr(x), the full-to-SWA slot translation.
inline int64_t Translate(const std::optional<HostTensor<int64_t>>& lut, int64_t slot) {
  if (!lut.has_value() || slot < 0) return slot;
  return (*lut)[std::min<int64_t>(slot, lut->shape()[0] - 1)];
}

// A paged table for the live rows of `b` (positions [0, prefix + extend) each): every row's blocks
// drawn from blocks 1.. (in order, or permuted), and req_to_token derived from them. Returns the
// full pool's slot count, a whole number of blocks.
inline int64_t MakePagedTable(const SweepCase& c, Rng& rng, int64_t table_rows, int64_t width,
                              Batch& b) {
  const int64_t block = c.block_size;
  const int64_t max_blocks = (width + block - 1) / block;
  int64_t blocks_used = 0;
  for (size_t r = 0; r < b.rp.size(); ++r) {
    if (b.rp[r] != 0) blocks_used += (b.prefix[r] + b.extend[r] + block - 1) / block;
  }
  const bool sparse = c.table == TableKind::kSparsePermuted;
  const int64_t pool_blocks = 1 + (sparse ? blocks_used + blocks_used / 2 + 1 : blocks_used);
  std::vector<int64_t> order(pool_blocks - 1);
  std::iota(order.begin(), order.end(), int64_t{1});
  if (sparse) rng.Shuffle(order.begin(), order.end());
  HostTensor<int64_t> ids({table_rows, max_blocks});
  int64_t next = 0;
  for (size_t r = 0; r < b.rp.size(); ++r) {
    if (b.rp[r] == 0) continue;
    const int64_t len = b.prefix[r] + b.extend[r];
    for (int64_t k = 0; k < (len + block - 1) / block; ++k) ids.at(b.rp[r], k) = order[next++];
    for (int64_t pos = 0; pos < len; ++pos) b.tokens[r].push_back(rng.Int(1, 150000));
  }
  b.table = HostTensor<int32_t>({table_rows, max_blocks * block});
  for (int64_t row = 0; row < table_rows; ++row) {
    for (int64_t pos = 0; pos < max_blocks * block; ++pos) {
      b.table.at(row, pos) =
          static_cast<int32_t>(ids[row * max_blocks + pos / block] * block + pos % block);
    }
  }
  b.block_ids = std::move(ids);
  return pool_blocks * block;
}

inline Batch MakeBatch(const SweepCase& c, Rng& rng) {
  Batch b;
  const int64_t bs = c.bs;
  b.rp.assign(bs, 0);
  b.prefix.resize(bs);
  b.extend.resize(bs);
  b.tokens.resize(bs);
  const int64_t table_rows = bs + 1 + rng.Int(0, 3);
  std::vector<int64_t> free_rows(table_rows - 1);
  std::iota(free_rows.begin(), free_rows.end(), int64_t{1});
  rng.Shuffle(free_rows.begin(), free_rows.end());
  const int64_t trailing = c.padding == PaddingKind::kTrailing ? std::max<int64_t>(1, bs / 8) : 0;
  int64_t width = 1;
  int64_t used = 0;
  for (int64_t r = 0; r < bs; ++r) {
    b.prefix[r] = rng.Pick(c.prefixes);
    b.extend[r] = rng.Pick(c.extends);
    const bool padding =
        r >= bs - trailing || (c.padding == PaddingKind::kInterleaved && rng.OneIn(4));
    if (padding) continue;
    b.rp[r] = free_rows[r];
    width = std::max(width, b.prefix[r] + b.extend[r]);
    used += b.prefix[r] + b.extend[r];
  }
  // Full-pool slots: consecutive, or a sparse permutation; slot 0 is never used.
  const bool sparse = c.table == TableKind::kSparsePermuted;
  int64_t full_slots = 1 + (sparse ? used + used / 2 + 1 : used);
  if (c.block_size > 0) {
    full_slots = MakePagedTable(c, rng, table_rows, width, b);
  } else {
    std::vector<int32_t> order(full_slots - 1);
    std::iota(order.begin(), order.end(), 1);
    if (sparse) rng.Shuffle(order.begin(), order.end());
    b.table = HostTensor<int32_t>({table_rows, width});
    int64_t next = 0;
    for (int64_t r = 0; r < bs; ++r) {
      if (b.rp[r] == 0) continue;
      for (int64_t pos = 0; pos < b.prefix[r] + b.extend[r]; ++pos) {
        b.table.at(b.rp[r], pos) = order[next++];
        b.tokens[r].push_back(rng.Int(1, 150000));
      }
    }
  }
  b.num_slots = full_slots;
  if (c.lut == LutKind::kNone) return b;

  // A block table's LUT holds the full pool and one entry more (0), as an engine's does.
  HostTensor<int64_t> lut({full_slots + (c.block_size > 0 ? 1 : 0)});
  std::iota(lut.values().begin(), lut.values().begin() + full_slots, int64_t{0});  // LUT[0] = 0
  if (c.lut == LutKind::kShift100) {
    for (int64_t i = 1; i < full_slots; ++i) lut[i] += 100;
    b.num_slots += 100;
  }
  if (c.lut == LutKind::kPermutation || c.lut == LutKind::kPermutationOutOfRange) {
    rng.Shuffle(lut.values().begin() + 1, lut.values().begin() + full_slots);
  }
  if (c.lut == LutKind::kPermutationOutOfRange && full_slots > 1) {
    // Values outside the SWA pool: verify skips / leaves the chain unchecked, write skips (D7);
    // -1 as a predecessor means "chain head".
    for (int k = 0; k < 3; ++k) lut[rng.Int(1, full_slots - 1)] = b.num_slots + rng.Int(0, 5);
    lut[rng.Int(1, full_slots - 1)] = -1;
  }
  if (c.window > 0) {  // SWA eviction: prefix positions before the window are no longer resident
    for (int64_t r = 0; r < bs; ++r) {
      if (b.rp[r] == 0) continue;
      for (int64_t pos = 0; pos < b.prefix[r] - c.window; ++pos) lut[Rt(b.table, b.rp[r], pos)] = 0;
    }
  }
  b.lut = std::move(lut);
  return b;
}

}  // namespace kvcanary::testing::sweep_internal
