// The plan operation: turns a forward's batch description into the list
// of prefix records to verify and the per-row write ranges and chain seeds.
//
// Every op here validates all of its arguments before it writes anything and throws
// kvcanary::Error on the first failure. Work is enqueued on `stream` (CUDA) or done before return
// (CPU); nothing synchronises, allocates (when a scratch is supplied) or reads device values on
// the host, so CUDA launches may be captured in a graph.
#pragma once

#include <cstdint>
#include <optional>

#include "kvcanary/tensor.h"

namespace kvcanary {

// The verify plan of one launch. Entries [0, verify_num_valid) are meaningful.
struct VerifyPlanView {
  TensorView verify_slot_indices;        // [C] int64 canary slot to check (SWA-translated)
  TensorView verify_expected_tokens;     // [C] int64 expected token, -1 = do not check
  TensorView verify_expected_positions;  // [C] int64 expected position
  TensorView verify_prev_slot_indices;   // [C] int64 predecessor; -1 head, 0 unreachable
  TensorView verify_num_valid;           // [1] int32 active entries (clamped to C)
  TensorView enable;                     // [1] int32 0 = plan overflowed, verify does nothing
};

// The write plan of one launch: row r writes flat tokens [write_offsets[r], write_offsets[r+1]).
struct WritePlanView {
  TensorView write_offsets;            // [R+1] int64 exclusive prefix sum of write counts
  TensorView write_seed_slot_indices;  // [R] int64 chain seed slot per row, -1 = anchor
  TensorView write_num_valid_reqs;     // [1] int32 rows the write op processes
};

// Bytes of the plan arrays for a capacity. Throw V11/V12 (W13/W14) for a capacity <= 0 or one
// above the int32 device counts.
int64_t VerifyPlanAllocationBytes(int64_t verify_capacity);
int64_t WritePlanAllocationBytes(int64_t write_req_capacity);

// The largest block_size a block table may have: far above any engine's (16 to 256), low enough
// that block arithmetic on int64 positions cannot overflow.
inline constexpr int64_t kMaxBlockSize = int64_t{1} << 20;

// The largest verify_sample: far above any useful rotation, low enough that the sampled-position
// arithmetic on int64 positions cannot overflow.
inline constexpr int64_t kMaxVerifySample = int64_t{1} << 16;
// Sampled verify checks positions in runs of this many consecutive ones (a page of most engines),
// so its reads stay contiguous.
inline constexpr int64_t kVerifySampleRun = 16;

// The batch a forward describes and the tables that locate its tokens: what Plan, PlanOffsets,
// PlanEntries and FusedVerify read. One type, so a forward's inputs are described once and every
// op checks them with the same code (docs/validation.md).
struct PlanInputs {
  TensorView req_pool_indices;  // [bs] int64 req_to_token row per batch row; 0 = padding
  TensorView prefix_lens;       // [bs] int64 tokens already in KV
  // [bs] int64 tokens this forward writes. Plan and PlanOffsets need it; PlanEntries and
  // FusedVerify do not read it (absent is fine, a given one is checked).
  TensorView extend_seq_lens;
  // [rows, width] int32 full-pool slot per (row, position). The C++ API accepts any view with
  // unit inner stride and row stride >= width (a slice of a wider table; docs/validation.md).
  TensorView req_to_token;
  // A paged block table instead of req_to_token: [rows, max_blocks] int32 or int64 block ids;
  // the slot of (row, position) is block_table[row, position / block_size] * block_size
  // + position % block_size. Exactly one of req_to_token and block_table is given.
  // (kvcanary addition; same view rule as req_to_token, docs/page_tables.md.)
  TensorView block_table;
  int64_t block_size = 1;  // tokens per block; must be 1 with req_to_token
  // An engine that keeps the table as pointer + pitch passes its pitch here; it must equal
  // the given table's stride(0) (O18), which catches a hard-coded pitch after the table became a
  // view.
  std::optional<int64_t> req_to_token_stride0;
  // The Python launchers keep SGLang's contiguity check on req_to_token (O1).
  bool require_contiguous_req_to_token = false;
  int64_t swa_window_size = 0;           // W > 0: verify only the last W prefix positions
  TensorView full_to_swa_index_mapping;  // [lut_len] int64 or absent; required when W > 0
  TensorView req_to_verify_expected_tokens;             // [pool_rows, pool_width] int32 or absent
  TensorView req_to_verify_expected_tokens_valid_lens;  // [bs] int64; required with the pool
  int64_t kv_token_id_vs_position_offset = 0;           // 0 target, +1 EAGLE draft
  // Sampled verify (kvcanary addition, docs/sampled_verify.md): with K = verify_sample in
  // [1, kMaxVerifySample], a row with verify positions [start, prefix_len) verifies only those p
  // with (p / kVerifySampleRun + phase) % K == 0 (runs of 16 consecutive positions), plus
  // prefix_len - 1 when it is not one of them (entries in increasing position order). K = 1 (the
  // default) verifies every position.
  // verify_phase: [n >= 1] int64 on the inputs' device, absent = phase 0; a row's phase is
  // verify_phase[clamp(req_pool_index, 0, n - 1)] (n = 1: one phase for every row; one entry per
  // req_to_token row: a phase per request), read on the device, so a graph replays with the
  // phases of the moment. Every op given the same inputs reads the same phases.
  int64_t verify_sample = 1;
  TensorView verify_phase;
};

// launch_canary_plan_kernels: both stages in one call.
//
// kvcanary addition, the offsets-only plan: with the four verify entry arrays of verify_plan_out
// absent, only stage 1 runs (offsets, verify_num_valid and enable against verify_capacity, the
// write plan). FusedVerify then derives the entries from the same inputs and the scratch, which
// is required, so no per-entry array exists and verify_capacity only bounds the work.
struct PlanArgs {
  PlanInputs inputs;
  VerifyPlanView verify_plan_out;
  WritePlanView write_plan_out;
  int64_t verify_capacity = 0;        // = len(verify_slot_indices); any >= 0 offsets-only
  TensorView verify_offsets_scratch;  // [>= bs+1] int64 workspace, optional
};
void Plan(const PlanArgs& args, StreamHandle stream = nullptr);

// launch_plan_offsets_kernel: the first stage alone. Keeps SGLang's bs <= 4096 and
// scratch length >= 4097 limits. The expected-token pool of `inputs` is not read.
struct PlanOffsetsArgs {
  PlanInputs inputs;
  TensorView out_verify_offsets_scratch;   // [>= 4097] int64 exclusive prefix sum of verify lens
  TensorView out_write_offsets;            // [R+1] int64
  TensorView out_write_seed_slot_indices;  // [R] int64
  TensorView out_verify_num_valid;         // [1] int32
  TensorView out_verify_enable;            // [1] int32
  TensorView out_write_num_valid_reqs;     // [1] int32
  int64_t verify_capacity = 0;
  // SGLang's raw ABI passes the LUT length beside the tensor; absent = its length (has_swa_lut is
  // always derived: it is whether full_to_swa_index_mapping is given, so O9 cannot arise here).
  std::optional<int64_t> lut_len;
};
void PlanOffsets(const PlanOffsetsArgs& args, StreamHandle stream = nullptr);

// launch_plan_entries_kernel: the second stage alone.
struct PlanEntriesArgs {
  PlanInputs inputs;
  TensorView verify_offsets_scratch;         // [>= bs+1] int64 from PlanOffsets
  TensorView verify_enable;                  // [1] int32
  TensorView out_verify_slot_indices;        // [C] int64
  TensorView out_verify_expected_tokens;     // [C] int64
  TensorView out_verify_expected_positions;  // [C] int64
  TensorView out_verify_prev_slot_indices;   // [C] int64
};
void PlanEntries(const PlanEntriesArgs& args, StreamHandle stream = nullptr);

// Sampled verify's rotation (kvcanary addition): with req_pool_indices, each batch row that is
// not padding adds 1 to its entry verify_phase[clamp(req_pool_index)] (rows sharing an entry each
// add 1); without, every entry adds 1. Wrapping int64 adds on the device, one launch,
// graph-capturable. Run it once per forward after that forward's last verify: K forwards of a
// request then see K consecutive phases, so they verify every position of its prefix.
struct AdvanceVerifyPhaseArgs {
  TensorView verify_phase;      // [n >= 1] int64, read and written
  TensorView req_pool_indices;  // [bs] int64 or absent
};
void AdvanceVerifyPhase(const AdvanceVerifyPhaseArgs& args, StreamHandle stream = nullptr);

// launch_swa_translate_kernel: out[i] = tr(in[i]); in place allowed.
struct SwaTranslateArgs {
  TensorView slot_indices;               // [n] int64
  TensorView full_to_swa_index_mapping;  // [lut_len >= 1] int64
  TensorView out_slot_indices;           // [n] int64
};
void SwaTranslate(const SwaTranslateArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
