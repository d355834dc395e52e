// The batches a case rotates through while it is timed (rotating among input sets
// larger than the caches keeps a rep from reading what the previous one left in cache), each holding every tensor its launches read and write, allocated and
// bound once so a timed repetition only calls the ops.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "bench/cases.h"
#include "bench/device_tensor.h"
#include "bench/layout.h"
#include "bench/pool.h"
#include "kvcanary/kvcanary.h"

namespace kvcanary::bench {

// One cycle through a case's sets touches at least this much (when the table has the rows), far
// more than any last-level cache, so no repetition finds its data cached by an earlier one.
inline constexpr int64_t kRotationBytes = int64_t{512} << 20;
inline constexpr int64_t kMinInputSets = 2;
inline constexpr int64_t kMaxInputSets = 1024;

// One batch: requests [first_request, first_request + batch) of the case's layout.
struct InputSet {
  int64_t first_request = 0;
  // batch * prefix (batch * SampledPrefix with sampled verify): what plan emits, verify checks
  int64_t verify_entries = 0;
  int64_t write_tokens = 0;    // batch * extend
  // The runtime's step stores its entries for its verifies (its default on this device,
  // StoredEntriesPay): HEAD stores them into the plan's arrays, which hold them all.
  bool stores_entries = false;

  // Plan inputs ([batch] int64 each; scratch [batch + 1]).
  DeviceTensor req_pool_indices, prefix_lens, extend_seq_lens, scratch;
  DeviceTensor verify_phase;  // [1] int64 0, in a sampled case only
  // Plan outputs: verify plan of capacity max(verify_entries, 1), write plan of capacity batch.
  DeviceTensor verify_slots, verify_tokens, verify_positions, verify_prevs;
  DeviceTensor verify_num_valid, verify_enable;
  DeviceTensor write_offsets, write_seeds, write_num_valid_reqs;
  // The forward's tokens ([batch * extend] int64 each).
  DeviceTensor input_ids, positions, out_cache_loc;

  PlanArgs plan_args;
  // The same plan without entry arrays (offsets and counts only), for FusedVerify.
  PlanArgs offsets_plan_args;
  // Indexed like kStepTags; BindMode points them at one real-data mode's contexts.
  std::array<VerifyArgs, 4> verify_args;
  std::array<FusedVerifyArgs, 4> fused_verify_args;
  std::array<WriteArgs, 4> write_args;
};

// The positions of a prefix a case verifies: all, or with sampled verify at phase 0 those of every
// K-th run of kVerifySampleRun and the newest one.
int64_t VerifiedPositions(const BenchCase& shape);

// The bytes one set's verify and write touch (partial mode).
int64_t InputSetBytes(const BenchCase& shape);

// Enough sets that a cycle touches kRotationBytes, clamped to [kMinInputSets, kMaxInputSets]
// and to the requests the table has rows for. Throws std::invalid_argument if not even
// kMinInputSets batches fit.
int64_t NumInputSets(const Suite& suite, const BenchCase& shape);

// REQUIRES: layout.num_requests() >= count * batch.
std::vector<InputSet> MakeInputSets(const Pool& pool, const CaseLayout& layout, int64_t count);

void BindMode(std::vector<InputSet>& sets, const Pool& pool, RealData mode);

// One canary step as the runtime runs it: a FusedStage for HEAD (the offsets-only plan, fused
// verify and write) and one for TAIL (fused verify and write), each over the K/V pair; with
// store_entries, HEAD stores the entries after its plan and both verifies read them.
void RunStep(const InputSet& set, StreamHandle stream, bool store_entries);

// The same step through the plan arrays: the full plan, then Verify of its entries.
void RunPlannedStep(const InputSet& set, StreamHandle stream);

// Index of `tag` in kStepTags.
int StepTagIndex(CanaryLaunchTag tag);

}  // namespace kvcanary::bench
