// One case of the CPU-vs-CUDA differential sweep: the knobs of the random step it generates
// (batch shape, LUT, table layout, padding, capacity, KV sources, token pool, corruptions and
// asserts), its seed, and how a failing case describes itself. random_inputs.h turns a case into
// the inputs of one step; sweep_cases.h lists the sweep's cases.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "kvcanary/kvcanary.h"

namespace kvcanary::testing {

enum class LutKind { kNone, kIdentity, kShift100, kPermutation, kPermutationOutOfRange };
enum class TableKind { kLinear, kSparsePermuted };
enum class PaddingKind { kNone, kTrailing, kInterleaved };
enum class CapacityKind { kLoose, kTight, kOneShort };

// Rows the sweep's ring holds: far more than any case records, so the ring never overflows and the
// rows of both backends can be compared as multisets.
inline constexpr int64_t kSweepRingCapacity = 4096;

struct SweepCase {
  std::string name;  // test name suffix
  uint64_t seed = 0;
  int64_t bs = 1;
  std::vector<int64_t> prefixes{0};  // each batch row's prefix_len is drawn from these
  std::vector<int64_t> extends{1};   // and its extend_seq_len from these
  LutKind lut = LutKind::kNone;
  int64_t window = 0;  // swa_window_size; > 0 only with a LUT
  TableKind table = TableKind::kLinear;
  bool strided_table = false;  // req_to_token a slice of a wider table
  // > 0: the plan reads a paged block table of this many tokens per block (int32 ids, int64 when
  // wide_block_ids) instead of req_to_token; its LUT then has one entry past the full pool.
  int64_t block_size = 0;
  bool wide_block_ids = false;
  PaddingKind padding = PaddingKind::kNone;
  CapacityKind capacity = CapacityKind::kLoose;  // verify capacity vs the entries the plan makes
  int num_sources = 0;
  int num_layers = 0;  // > 0: one source spanning this many layers of one geometry instead
  RealKvHashMode mode = RealKvHashMode::kNone;
  bool random_kv_bytes = true;  // else one constant byte per source
  bool kv_row_padding = false;  // bytes past page_size * num_bytes_per_token in every KV row
  int64_t slot_stride_bytes = 32;
  bool token_pool = false;  // expected-token pool, token check on
  int64_t pool_offset = 0;  // kv_token_id_vs_position_offset (1 = EAGLE draft)
  bool corrupt = false;     // flip bits of some records, KV bytes and pool tokens
  bool skips = false;       // negative out_cache_loc entries
  bool input_assert = false;
  bool chain_assert = false;
  bool scratch = true;  // pass verify_offsets_scratch
  bool paired = false;  // a V half verified and written in the same launch
  // > 1: sampled verify at this rate, with random phases (one per table row, or one for all when
  // one_phase).
  int64_t verify_sample = 1;
  bool one_phase = false;
};

inline std::string Describe(const SweepCase& c) {
  std::ostringstream out;
  out << c.name << " seed=" << c.seed << " bs=" << c.bs << " lut=" << static_cast<int>(c.lut)
      << " window=" << c.window << " table=" << static_cast<int>(c.table)
      << (c.strided_table ? "/strided" : "") << " block_size=" << c.block_size
      << (c.wide_block_ids ? "/int64" : "") << " padding=" << static_cast<int>(c.padding)
      << " capacity=" << static_cast<int>(c.capacity) << " sources=" << c.num_sources
      << " layers=" << c.num_layers
      << " mode=" << static_cast<int>(c.mode) << " stride=" << c.slot_stride_bytes
      << " pool=" << c.token_pool << "/+" << c.pool_offset << " corrupt=" << c.corrupt
      << " skips=" << c.skips << " input_assert=" << c.input_assert
      << " chain_assert=" << c.chain_assert << " scratch=" << c.scratch << " paired=" << c.paired
      << " verify_sample=" << c.verify_sample << (c.one_phase ? "/one phase" : "");
  return out.str();
}
// GoogleTest prints a case parameter with this.
inline void PrintTo(const SweepCase& c, std::ostream* out) { *out << Describe(c); }

}  // namespace kvcanary::testing
