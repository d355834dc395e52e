// The shapes the bench times : suite `standard` and its 1/16 scale
// `quick`. Nothing here depends on the device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvcanary::bench {

// Tokens per block of the paged cases: their plan inputs are an int32 block table, not
// req_to_token.
inline constexpr int64_t kPagedBlockSize = 16;

// One forward of an MHA FULL group: `batch` requests, each with `prefix` tokens already in KV
// (verified) and `extend` tokens written by this forward. A paged case (block_size > 0) locates
// its slots through a block table of that block size (prefix a multiple of it), its requests'
// slots then running in whole blocks. A sampled case (verify_sample K > 1) verifies a rotating
// 1/K of each prefix plus its newest position (PlanInputs::verify_sample), at phase 0.
struct BenchCase {
  std::string name;
  int64_t batch = 0;
  int64_t prefix = 0;
  int64_t extend = 0;
  int64_t block_size = 0;
  int64_t verify_sample = 1;
};

// The sampled-verify rates the suites time the decode shapes and prefill-mixed at, besides K = 1.
inline constexpr int64_t kBenchVerifySamples[] = {2, 4, 8, 16};

// Which real-KV bytes the TAIL launches fingerprint.
enum class RealData {
  kNone,     // no sources: every record's fourth field is 0
  kPartial,  // one source of real_kv_bytes_per_token bytes per token; 16 bytes folded per slot
};
inline constexpr RealData kRealDataModes[] = {RealData::kNone, RealData::kPartial};
const char* RealDataName(RealData mode);

// Verify runs as the runtime runs it by default (enable_verify_token_assert =
// false): no token pool in the plan, no token check, so verify never reads
// verify_expected_tokens.
inline constexpr bool kCheckVerifyExpectedToken = false;

struct Suite {
  std::string name;
  int64_t num_slots = 0;          // KV pool (and canary buffer) slots, slot 0 included
  int64_t req_to_token_rows = 0;  // row 0 is the padding row and holds no request
  int64_t req_to_token_cols = 0;
  int64_t ring_capacity = 1024;
  int64_t real_kv_bytes_per_token = 256;  // the one `partial` source's strip
  // Layers that source folds (`kvcanary bench --fingerprint-layers`): 1 is layer 0 alone; more is
  // one source spanning that many layers of the pool (RealKvSource::layer_addresses), each layer
  // its own allocation as in an engine.
  int64_t fingerprint_layers = 1;
  int default_reps = 20;
  std::vector<BenchCase> cases;
};

// The standard suite: pool 2,000,000, req_to_token 4096 x 32768, eight cases, then decode-256,
// prefill-8k and prefill-mixed again over a block table (kPagedBlockSize, int32 ids), then
// decode-64, decode-256, decode-1024, long-32 and prefill-mixed with sampled verify at each of
// kBenchVerifySamples ("-k8").
Suite StandardSuite();

// `standard` with each of these divided by 16 (rounded down, at least 1): the pool's slots,
// req_to_token's rows and columns, and every case's batch, prefix and extend (decode cases keep
// extend 1). Unchanged: the case names, the ring capacity, the 256-byte real-KV strip (a token's
// layout, not a size) and the timing method. The pool is then rounded down to whole blocks of
// kPagedBlockSize (FusedVerify refuses blocks that do not tile it). At this size the pool fits in the caches of most
// machines, so quick numbers are a smoke test, not bandwidth figures.
Suite QuickSuite();

const std::vector<std::string>& SuiteNames();
// Keeps only the cases named (in the order given, repeats once); throws std::invalid_argument
// naming an unknown case and listing the suite's.
void KeepCases(Suite& suite, const std::vector<std::string>& names);
// Throws std::invalid_argument for a name not in SuiteNames().
Suite SuiteByName(std::string_view name);

}  // namespace kvcanary::bench
