// Plain parameter structs the ops layer hands to a backend: raw pointers, sizes and strides,
// already validated. The CPU loops and the CUDA kernels take the same structs, so the two backends
// see one description of each launch. Nothing here owns memory.
#pragma once

#include <cstdint>

#include "kvcanary/format.h"

namespace kvcanary {

// One real-KV source as a byte matrix.
struct RealKvSourceParams {
  // [rows, row_stride_bytes] uint8, 16-byte aligned rows
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t row_stride_bytes = 0;
  int64_t page_size = 1;
  int64_t num_bytes_per_token = 0;
  int64_t fold_bytes = 0;  // 16 in PARTIAL, read_bytes in ALL; a multiple of 16
  // A source spanning layers (a kvcanary addition): [num_layers] base addresses of byte matrices
  // laid out like `data` (on the launch's device), folded in order; nullptr: `data` alone.
  const int64_t* layer_addresses = nullptr;
  int64_t num_layers = 1;
};

// The sources of one launch; num_sources is 0 when the mode is NONE.
struct RealKvParams {
  RealKvSourceParams sources[kMaxRealKvSources];
  int32_t num_sources = 0;
};

// What verify and write share: records, ring, counters, sources.
struct LaunchParams {
  // [num_slots, slot_stride_bytes] uint8 records
  uint8_t* canary = nullptr;
  int64_t num_slots = 0;
  int64_t slot_stride_bytes = 0;
  int64_t kernel_kind = 0;
  // [ring_capacity, 8] int64 violation rows
  int64_t* ring = nullptr;
  int64_t ring_capacity = 0;
  // [1] int32 violations ever recorded
  int32_t* write_index = nullptr;
  // [1] int64 entries processed
  int64_t* slot_run_counter = nullptr;
  // [1] int64 launches
  int64_t* kernel_run_counter = nullptr;
  RealKvParams real_kv;
};

struct VerifyParams {
  LaunchParams launch;
  // [capacity] int64 each
  const int64_t* slot_indices = nullptr;
  const int64_t* expected_tokens = nullptr;
  const int64_t* expected_positions = nullptr;
  const int64_t* prev_slot_indices = nullptr;
  // [1] int32 each
  const int32_t* num_valid = nullptr;
  const int32_t* enable = nullptr;
  int64_t capacity = 0;
  bool check_token = false;
};

struct WriteParams {
  LaunchParams launch;
  // [capacity + 1] int64
  const int64_t* offsets = nullptr;
  // [capacity] int64
  const int64_t* seeds = nullptr;
  // [1] int32
  const int32_t* num_valid_reqs = nullptr;
  int64_t capacity = 0;
  // [num_tokens] int64 each
  const int64_t* input_ids = nullptr;
  const int64_t* positions = nullptr;
  const int64_t* out_cache_loc = nullptr;
  int64_t num_tokens = 0;
  bool input_assert = false;
  // [num_tokens] int64 each; only when input_assert
  const int64_t* expected_tokens = nullptr;
  const int64_t* expected_positions = nullptr;
  // [1] int32 chain-position assert flag
  const int32_t* enable_chain_position_assert = nullptr;
};

// The table that locates a token's slot, read through its row stride (a slice of a wider table;
// unit inner stride): req_to_token (one int32 slot per position), or a paged block table (one
// int32 or int64 block id per block_size positions). ReadReqToToken reads both.
struct ReqToTokenParams {
  // [rows, row_stride] int32 slots, or int32 block ids when paged
  const int32_t* data = nullptr;
  int64_t rows = 0;
  int64_t width = 0;       // positions per row: the table's columns times block_size
  int64_t row_stride = 0;  // in table elements
  // A block table (paged): cells are block ids, int32 in data or int64 in data64 (then data is
  // nullptr). Not paged: cells are slots (an int32 block table of block_size 1 reads as one).
  // block_shift is log2(block_size) for a power of two, else -1.
  bool paged = false;
  int64_t block_size = 1;
  int32_t block_shift = 0;
  const int64_t* data64 = nullptr;
};

// The full -> SWA slot table; len 0 means "no table" (identity).
struct SwaLutParams {
  // [len] int64
  const int64_t* data = nullptr;
  int64_t len = 0;
};

// The expected-token pool; data == nullptr means "no pool" (every expected token is -1).
struct TokenPoolParams {
  // [rows, row_stride] int32
  const int32_t* data = nullptr;
  int64_t rows = 0;
  int64_t width = 0;
  int64_t row_stride = 0;
  // [bs] int64 valid length per batch row
  const int64_t* valid_lens = nullptr;
  int64_t position_offset = 0;
};

// The batch description both plan stages read.
struct PlanInputParams {
  // [bs] int64 each (extend_seq_lens unused by the entries stage)
  const int64_t* req_pool_indices = nullptr;
  const int64_t* prefix_lens = nullptr;
  const int64_t* extend_seq_lens = nullptr;
  int64_t bs = 0;
  int64_t swa_window_size = 0;
  // Sampled verify (kvcanary addition): K = verify_sample; a row verifies the positions p of its
  // verify range with (p / kVerifySampleRun + phase) % K == 0, plus its newest prefix position.
  // phase = verify_phase[clamp(req_pool_index)] ([phase_len] int64); nullptr reads as 0.
  int64_t verify_sample = 1;
  const int64_t* verify_phase = nullptr;
  int64_t verify_phase_len = 0;
  ReqToTokenParams req_to_token;
  SwaLutParams lut;
  TokenPoolParams pool;
};

struct VerifyPlanOutParams {
  // [capacity] int64 each
  int64_t* slot_indices = nullptr;
  int64_t* expected_tokens = nullptr;
  int64_t* expected_positions = nullptr;
  int64_t* prev_slot_indices = nullptr;
  // [1] int32 each (unused by the entries stage)
  int32_t* num_valid = nullptr;
  int32_t* enable = nullptr;
  int64_t capacity = 0;
};

struct WritePlanOutParams {
  // [offsets_len] int64
  int64_t* offsets = nullptr;
  int64_t offsets_len = 0;
  // [>= bs] int64
  int64_t* seeds = nullptr;
  // [1] int32
  int32_t* num_valid_reqs = nullptr;
};

// The fused plan. scratch: [>= bs + 1] int64 workspace, or nullptr (the backend provides one).
struct PlanParams {
  PlanInputParams in;
  VerifyPlanOutParams verify;
  WritePlanOutParams write;
  int64_t* scratch = nullptr;
};

// Stage 1. scratch: [>= bs + 1] int64 exclusive prefix sum of verify lengths (an output).
struct PlanOffsetsParams {
  PlanInputParams in;
  int64_t* scratch = nullptr;
  int32_t* verify_num_valid = nullptr;
  int32_t* verify_enable = nullptr;
  int64_t verify_capacity = 0;
  WritePlanOutParams write;
};

// Stage 2. scratch: [>= bs + 1] int64 from stage 1; enable: [1] int32. A total above the
// capacity breaks the offsets/entries contract (the CPU raises; the CUDA kernel prints the message
// and writes nothing) unless only_when_fits: then nothing is written, silently (a fused stage
// storing its entries for the verifies when they fit).
struct PlanEntriesParams {
  PlanInputParams in;
  const int64_t* scratch = nullptr;
  const int32_t* enable = nullptr;
  VerifyPlanOutParams verify;
  bool only_when_fits = false;
};

// Verify entries as stage 2 stores them ([capacity] int64 each), for a fused verify to read.
struct StoredEntryParams {
  const int64_t* slot_indices = nullptr;
  const int64_t* expected_tokens = nullptr;
  const int64_t* expected_positions = nullptr;
  const int64_t* prev_slot_indices = nullptr;
  int64_t capacity = 0;
};

// The fused verify (a kvcanary addition): the plan-entries stage and verify in one pass, each
// entry derived from the plan inputs and the stage-1 offsets instead of read from plan arrays.
struct FusedVerifyParams {
  LaunchParams launch;
  PlanInputParams in;  // extend_seq_lens unused
  // [>= bs + 1] int64 exclusive prefix sum of verify lengths (stage 1's scratch)
  const int64_t* scratch = nullptr;
  // [1] int32 each, from stage 1
  const int32_t* num_valid = nullptr;
  const int32_t* enable = nullptr;
  int64_t capacity = 0;  // the verify capacity stage 1 was given
  bool check_token = false;
  // Entries a stage 2 of the same inputs stored (kvcanary: a fused stage's HEAD): when the
  // launch's n entries fit them (n <= stored.capacity), entries [0, n) are read from them as
  // Verify reads a plan's instead of derived. slot_indices nullptr: always derived.
  StoredEntryParams stored;
};

// The halves of a verify or write launch: a K launch alone, or K and V of one group in one
// paired launch (half[1] only when num_halves == 2), both built from one call's arguments, so they
// differ only in their launch. The CUDA kernels take it by value as their grid constant; the CPU
// backend derives a verify's entries once and checks each against both halves in turn (when they
// fold no real KV; otherwise it runs the halves one after the other).
inline constexpr int kMaxHalves = 2;
template <typename Params>
struct Halves {
  Params half[kMaxHalves];
  int num_halves = 1;
};
using VerifyHalves = Halves<VerifyParams>;
using FusedVerifyHalves = Halves<FusedVerifyParams>;
using WriteHalves = Halves<WriteParams>;

struct ScatterParams {
  // [total] int64, element stride flat_stride
  const int64_t* flat_in = nullptr;
  int64_t total = 0;
  int64_t flat_stride = 1;
  // [bs + 1] int64
  const int64_t* offsets = nullptr;
  int64_t offsets_stride = 1;
  // [bs] int64
  const int64_t* req_pool_indices = nullptr;
  int64_t req_pool_indices_stride = 1;
  int64_t bs = 0;
  // [pool_rows, pool_width] int32 with strides (pool_stride0, pool_stride1)
  int32_t* pool = nullptr;
  int64_t pool_rows = 0;
  int64_t pool_width = 0;
  int64_t pool_stride0 = 0;
  int64_t pool_stride1 = 1;
};

// Sampled verify's rotation: phase[clamp(rp)] += 1 for each batch row's rp that is not padding
// (every entry += 1 without rows); wrapping.
struct AdvancePhaseParams {
  int64_t* phase = nullptr;  // [len] int64
  int64_t len = 0;
  const int64_t* req_pool_indices = nullptr;  // [bs] int64 or nullptr
  int64_t bs = 0;
};

// The jitter fuzzer's delay: spin for min(*cycles, max_cycles) device clock ticks, stopping after
// max_nanoseconds of wall-clock time whatever the ticks.
struct SpinWaitParams {
  const int64_t* cycles = nullptr;  // [1] int64, read when the kernel runs
  int64_t max_cycles = 0;
  int64_t max_nanoseconds = 0;
};

struct SwaTranslateParams {
  // [n] int64 each; may alias
  const int64_t* in = nullptr;
  int64_t* out = nullptr;
  int64_t n = 0;
  SwaLutParams lut;
};

// One stage (HEAD or TAIL) of a forward for one group: with has_plan, the offsets-only fused
// plan (its scratch given) first; with has_store, stage 2 of that plan into the verify's stored
// entries when they fit (only_when_fits); then the fused verify; then the write; then, with
// has_advance, the phase advance. Each part sees the memory the previous part left, as launches
// in a row would.
struct StageParams {
  PlanParams plan;
  bool has_plan = false;
  PlanEntriesParams store;
  bool has_store = false;
  FusedVerifyHalves verify;
  WriteHalves write;
  AdvancePhaseParams advance;
  bool has_advance = false;
};

}  // namespace kvcanary
