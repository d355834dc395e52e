// CPU reference of the verify operation and of the fused verify (entries
// derived from the plan inputs). Entries are checked in parallel chunks; each chunk keeps its rows
// and the rows are recorded in entry order afterwards.
#include <algorithm>
#include <initializer_list>
#include <vector>

#include "core/real_kv.h"
#include "core/verify_math.h"
#include "core/wrap.h"
#include "cpu/backend.h"
#include "cpu/check_block.h"
#include "cpu/lookahead.h"
#include "cpu/parallel.h"
#include "cpu/ring.h"

namespace kvcanary::cpu {
namespace {

// The rows one chunk found: those that can still reach the ring, and how many more.
struct ChunkRows {
  std::vector<ViolationRow> kept;
  int64_t dropped = 0;
};

// Counts each launch, then checks entries [0, n) of an enabled one against each launch, deriving
// every entry once. make_cursor(first) gives an object whose At(e) returns entry e, asked for in
// increasing e from `first`. Counters and rows come out as from one call per launch in order:
// every row of the first launch is recorded before any of the second's.
template <typename MakeCursor>
void CheckEntries(const Launches& launches, bool check_token, bool enabled, int64_t n,
                  MakeCursor&& make_cursor) {
  for (int l = 0; l < launches.count; ++l) {
    const LaunchParams& launch = *launches.of[l];
    *launch.kernel_run_counter = WrapAdd(*launch.kernel_run_counter, 1);
    if (enabled) *launch.slot_run_counter = WrapAdd(*launch.slot_run_counter, n);
  }
  if (!enabled) return;
  const int chunks = ChunkCount(n);
  // A chunk's row i lands at write_index + (rows of earlier chunks) + i, so only its first
  // `keep` rows can reach the ring; the others are counted, not buffered: host memory stays
  // bounded by the ring's capacity, not by the number of failing entries. (A later launch's rows
  // land after the earlier launches' when they share a ring: its `keep` is then an upper bound.)
  int64_t keep[kMaxHalves];
  std::vector<ChunkRows> found[kMaxHalves];
  for (int l = 0; l < launches.count; ++l) {
    keep[l] = std::max<int64_t>(0, launches.of[l]->ring_capacity - *launches.of[l]->write_index);
    found[l].resize(chunks);
  }
  ForEachChunk(n, chunks, [&](int chunk, int64_t begin, int64_t end) {
    Lookahead lookahead(launches, make_cursor(begin), begin, end);
    BlockFailure failures[kCheckBlockEntries];
    for (int64_t first = begin; first < end; first += lookahead.block()) {
      const int count = static_cast<int>(std::min(lookahead.block(), end - first));
      const VerifyEntry* entries = lookahead.TakeBlock(first);
      for (int l = 0; l < launches.count; ++l) {
        const int failing = CheckBlock(*launches.of[l], check_token, entries, count, failures);
        ChunkRows& rows = found[l][chunk];
        for (int k = 0; k < failing; ++k) {
          if (static_cast<int64_t>(rows.kept.size()) < keep[l]) {
            rows.kept.push_back(failures[k].row);
          } else {
            rows.dropped += 1;
          }
        }
      }
    }
  });
  for (int l = 0; l < launches.count; ++l) {
    for (const ChunkRows& rows : found[l]) {
      RecordViolations(*launches.of[l], rows.kept);
      CountDroppedViolations(*launches.of[l], rows.dropped);
    }
  }
}

// Entries of a plan's arrays.
struct PlannedCursor {
  StoredEntryParams stored;
  bool check_token = false;
  VerifyEntry At(int64_t e) const { return StoredEntry(stored, check_token, e); }
  // Plan arrays do not say whether they hold a sampled verify.
  bool SparsePredecessors() const { return true; }
};

// Entries derived from the plan inputs: the row found once by binary search, then walked forward
// (the offsets are non-decreasing), its positions derived once per row; an entry whose position
// follows the last entry's in its row takes that entry's slot as its predecessor instead of
// reading the table again (every entry of a full verify, all but the first of a sampled run).
//
// A row whose positions all lie inside its req_to_token (or block-table) row, so that no clamp
// can apply, read without the expected-token pool, is a run: the position of its j-th entry
// (start + j, or the j-th sampled position) is read straight from the row's cells. That is most of
// every verify, and it costs a compare, a load and the SWA lookup an entry, where the general path
// re-derives the row, its positions, the index and the clamps each time (and a plan-array verify
// reads 32 bytes of plan an entry).
struct FusedCursor {
  FusedCursor(const FusedVerifyParams& p, int64_t first)
      : params(&p), row(RowOfEntry(p.scratch, p.in.bs, first)) {}
  bool SparsePredecessors() const { return params->in.verify_sample > 1; }
  VerifyEntry At(int64_t e) {
    if (e >= run_end && !EnterRun(e)) return General(e);
    const int64_t position = PositionInRow(params->in, run_positions, e - run_row_begin);
    // A guard that costs two compares (EnterRun proved every position of the run in range); it
    // ends the run, so no later entry takes a predecessor from across the general path.
    if (position < 0 || position >= params->in.req_to_token.width) {
      run_end = 0;
      return General(e);
    }
    const bool follows = e > run_first_entry && position == run_last_position + 1;
    VerifyEntry entry;
    entry.slot = TranslateSlot(params->in.lut, RunCell(position));
    entry.prev_slot = position == 0 ? -1
                      : follows     ? last_slot
                                    : TranslateSlot(params->in.lut, RunCell(position - 1));
    entry.position = position;
    last_slot = entry.slot;
    run_last_position = position;
    return entry;
  }

  // The slot of `position` of the run's row, as ReadReqToToken reads it when nothing clamps.
  int64_t RunCell(int64_t position) const {
    const ReqToTokenParams& table = params->in.req_to_token;
    if (table.paged) return ReadPagedSlot(table, run_row_base, position);
    return table.data[run_row_base + position];
  }

  // Starts the run of e's row when the row is one (see above); false otherwise.
  bool EnterRun(int64_t e) {
    const PlanInputParams& in = params->in;
    const ReqToTokenParams& table = in.req_to_token;
    if (params->check_token && in.pool.data != nullptr) return false;
    const int64_t r = WalkTo(e);
    const int64_t begin = params->scratch[r];
    const int64_t end = r + 1 < in.bs ? params->scratch[r + 1] : FusedEntryCount(*params);
    const int64_t rp = in.req_pool_indices[r];
    if (begin < 0 || begin > e || end <= e || rp < 0 || rp >= table.rows) return false;
    const RowPositions positions = RowPositionsOf(in, r);
    // Every position an entry of [begin, end) reads lies in [0, width): a full verify's run
    // [start, start + (end - begin)); a sampled one's lie in [start, newest] or are the newest.
    const int64_t newest = WrapSub(positions.end, 1);
    const bool inside = in.verify_sample <= 1
                            ? positions.start >= 0 && positions.start <= table.width &&
                                  end - begin <= table.width - positions.start
                            : positions.start >= 0 && newest >= 0 && newest < table.width;
    if (!inside) return false;
    run_row_base = rp * table.row_stride;
    run_positions = positions;
    run_row_begin = begin;
    run_first_entry = e;
    run_end = end;
    last_row = -1;  // the general path's `follows` never reaches back past a run
    return true;
  }

  VerifyEntry General(int64_t e) {
    const int64_t r = WalkTo(e);
    const int64_t position = PositionOf(r, e);
    const bool follows = r == last_row && position == WrapAdd(last_position, 1);
    const VerifyEntry entry = FusedEntryAt(*params, r, position, follows ? &last_slot : nullptr);
    last_row = r;
    last_position = position;
    last_slot = entry.slot;
    return entry;
  }
  int64_t WalkTo(int64_t e) {
    while (row + 1 < params->in.bs && params->scratch[row + 1] <= e) ++row;
    return row;
  }
  int64_t PositionOf(int64_t r, int64_t e) {
    if (r != positions_row) {
      positions = RowPositionsOf(params->in, r);
      positions_row = r;
    }
    return PositionInRow(params->in, positions, WrapSub(e, params->scratch[r]));
  }
  const FusedVerifyParams* params;
  int64_t row;
  int64_t last_row = -1;
  int64_t last_position = 0;
  int64_t last_slot = 0;
  int64_t positions_row = -1;
  RowPositions positions;
  // The current run: entries [run_first_entry, run_end) of the row whose entries begin at
  // run_row_begin, its positions and first cell.
  RowPositions run_positions;
  int64_t run_row_base = 0;
  int64_t run_row_begin = 0;
  int64_t run_first_entry = 0;
  int64_t run_last_position = 0;
  int64_t run_end = 0;
};

Launches LaunchesOf(std::initializer_list<const LaunchParams*> launches) {
  Launches out;
  for (const LaunchParams* launch : launches) out.of[out.count++] = launch;
  return out;
}

void RunLaunches(const VerifyParams& params, const Launches& launches) {
  const bool enabled = *params.enable != 0;
  const int64_t n = enabled ? ClampCount(*params.num_valid, params.capacity) : 0;  // D2
  CheckEntries(launches, params.check_token, enabled, n, [&](int64_t) {
    return PlannedCursor{StoredEntriesOf(params), params.check_token};
  });
}

void RunLaunches(const FusedVerifyParams& params, const Launches& launches) {
  const int64_t n = FusedEntryCount(params);
  const bool enabled = *params.enable != 0;
  if (ReadsStoredEntries(params, n)) {
    CheckEntries(launches, params.check_token, enabled, n, [&](int64_t) {
      return PlannedCursor{params.stored, params.check_token};
    });
    return;
  }
  CheckEntries(launches, params.check_token, enabled, n,
               [&](int64_t first) { return FusedCursor(params, first < n ? first : n - 1); });
}

// Whether checking both halves off one derive pays: measured on the 2-core EPYC development VM
// (decode-256, one and two threads, alternating), it does when neither half folds real KV (a
// sampled verify 16-28% faster; a full one within the measurement's noise of about 8%), and not
// when both fold a strip an entry (a full `partial` fused verify 10-16% slower: with four lines an
// entry a burst holds half the entries).
template <typename Params>
bool PairPays(const Halves<Params>& halves) {
  return halves.half[0].launch.real_kv.num_sources == 0 &&
         halves.half[1].launch.real_kv.num_sources == 0;
}

// Both halves check the same entries: Halves are built from one call's arguments and differ only
// in their launch (as the CUDA backend also relies on), so half[0]'s plan serves both.
template <typename Params>
void RunVerifyHalves(const Halves<Params>& halves) {
  if (halves.num_halves == 2 && PairPays(halves)) {
    RunLaunches(halves.half[0], LaunchesOf({&halves.half[0].launch, &halves.half[1].launch}));
    return;
  }
  for (int h = 0; h < halves.num_halves; ++h) RunHalf(halves.half[h]);
}

}  // namespace

void RunHalf(const VerifyParams& params) { RunLaunches(params, LaunchesOf({&params.launch})); }
void RunHalf(const FusedVerifyParams& params) { RunLaunches(params, LaunchesOf({&params.launch})); }
void RunHalves(const VerifyHalves& halves) { RunVerifyHalves(halves); }
void RunHalves(const FusedVerifyHalves& halves) { RunVerifyHalves(halves); }

}  // namespace kvcanary::cpu
