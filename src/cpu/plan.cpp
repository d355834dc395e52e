// CPU reference of the plan operation.
#include <algorithm>
#include <vector>

#include "core/plan_math.h"
#include "cpu/backend.h"
#include "cpu/parallel.h"

namespace kvcanary::cpu {
namespace {

// Stage 1 for rows [0, bs): scratch[r] = exclusive prefix sum of verify lengths, scratch[bs] = T;
// write_offsets[0..bs], seeds[0, bs), write_num_valid_reqs. Returns T.
int64_t ComputeOffsets(const PlanInputParams& in, int64_t* scratch,
                       const WritePlanOutParams& write) {
  int64_t verify_total = 0;
  int64_t write_total = 0;
  for (int64_t r = 0; r < in.bs; ++r) {
    const RowPlan row = PlanRow(in, r);
    scratch[r] = verify_total;
    write.offsets[r] = write_total;
    write.seeds[r] = row.seed_slot;
    verify_total = WrapAdd(verify_total, row.verify_len);
    write_total = WrapAdd(write_total, row.write_len);
  }
  scratch[in.bs] = verify_total;
  write.offsets[in.bs] = write_total;
  *write.num_valid_reqs = static_cast<int32_t>(in.bs);
  return verify_total;
}

// Stage 2: entry tid belongs to the largest row r with scratch[r] <= tid (empty rows never win)
// at position WindowStart(prefix) + tid - scratch[r]. Each chunk finds its first row by binary
// search and walks forward.
void EmitVerifyEntries(const PlanInputParams& in, const int64_t* scratch, int64_t total,
                       const VerifyPlanOutParams& out) {
  const int64_t count = std::min(total, out.capacity);  // equal on valid input; guards memory
  if (count <= 0 || in.bs <= 0) return;
  ForEachChunk(count, ChunkCount(count), [&](int, int64_t begin, int64_t end) {
    int64_t r = std::upper_bound(scratch, scratch + in.bs, begin) - scratch - 1;
    r = std::max<int64_t>(r, 0);
    int64_t positions_row = -1;
    RowPositions positions;
    for (int64_t tid = begin; tid < end; ++tid) {
      while (r + 1 < in.bs && scratch[r + 1] <= tid) ++r;
      if (r != positions_row) {  // a row's positions are derived once
        positions = RowPositionsOf(in, r);
        positions_row = r;
      }
      const int64_t position = PositionInRow(in, positions, WrapSub(tid, scratch[r]));
      StoreVerifyEntry(in, out, tid, r, in.req_pool_indices[r], position);
    }
  });
}

}  // namespace

void Plan(const PlanParams& params) {
  std::vector<int64_t> local_scratch;
  int64_t* scratch = params.scratch;
  if (scratch == nullptr) {
    local_scratch.resize(params.in.bs + 1);
    scratch = local_scratch.data();
  }
  const int64_t total = ComputeOffsets(params.in, scratch, params.write);
  std::fill(params.write.offsets + params.in.bs + 1,
            params.write.offsets + params.write.offsets_len, int64_t{0});
  const bool overflow = total > params.verify.capacity;
  *params.verify.num_valid = static_cast<int32_t>(overflow ? params.verify.capacity : total);
  *params.verify.enable = overflow ? 0 : 1;
  // An offsets-only plan has no entry arrays: FusedVerify derives the entries itself.
  const bool has_entries = params.verify.slot_indices != nullptr;
  if (!overflow && has_entries) EmitVerifyEntries(params.in, scratch, total, params.verify);
}

void PlanOffsets(const PlanOffsetsParams& params) {
  const int64_t total = ComputeOffsets(params.in, params.scratch, params.write);
  const bool overflow = total > params.verify_capacity;
  *params.verify_num_valid = static_cast<int32_t>(overflow ? params.verify_capacity : total);
  *params.verify_enable = overflow ? 0 : 1;
}

void PlanEntries(const PlanEntriesParams& params) {
  const int64_t total = params.scratch[params.in.bs];
  if (total <= 0 || params.enable[0] == 0) return;
  if (params.only_when_fits && total > params.verify.capacity) return;
  EmitVerifyEntries(params.in, params.scratch, total, params.verify);
}

void AdvancePhase(const AdvancePhaseParams& params) {
  if (params.req_pool_indices == nullptr) {
    for (int64_t i = 0; i < params.len; ++i) params.phase[i] = WrapAdd(params.phase[i], 1);
    return;
  }
  for (int64_t r = 0; r < params.bs; ++r) {
    const int64_t rp = params.req_pool_indices[r];
    if (rp == kReqPoolIdxPadding) continue;
    int64_t& phase = params.phase[ClampIndex(rp, params.len)];
    phase = WrapAdd(phase, 1);
  }
}

void SwaTranslate(const SwaTranslateParams& params) {
  ForEachChunk(params.n, ChunkCount(params.n), [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) params.out[i] = TranslateSlot(params.lut, params.in[i]);
  });
}

}  // namespace kvcanary::cpu
