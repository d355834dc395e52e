// CPU reference of the write operation. Every seed is read before any record
// is written; the real-KV fingerprints (independent per token) are computed in parallel; each
// row's chain then runs serially, recording rows in row, then token, order.
#include <vector>

#include "core/real_kv.h"
#include "core/wrap.h"
#include "core/write_math.h"
#include "cpu/backend.h"
#include "cpu/parallel.h"
#include "cpu/ring.h"

namespace kvcanary::cpu {

void RunHalf(const WriteParams& params) {
  const LaunchParams& launch = params.launch;
  const int64_t num_rows = ClampCount(*params.num_valid_reqs, params.capacity);  // D2
  // Host memory first: a failed allocation leaves the counters as they were.
  std::vector<ChainState> chains(num_rows);
  std::vector<uint64_t> real_kv_hashes;
  if (launch.real_kv.num_sources > 0) real_kv_hashes.assign(params.num_tokens, 0);
  *launch.kernel_run_counter = WrapAdd(*launch.kernel_run_counter, 1);

  for (int64_t r = 0; r < num_rows; ++r) chains[r] = LoadChainSeed(params, r);

  if (launch.real_kv.num_sources > 0) {
    ForEachChunk(
        params.num_tokens, ChunkCount(params.num_tokens), [&](int, int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            if (IsWrittenToken(params, i)) {
              real_kv_hashes[i] = RealKvFingerprint(launch.real_kv, params.out_cache_loc[i]);
            }
          }
        });
  }

  int64_t written = 0;
  auto record = [&](const ViolationRow& row) { RecordViolation(launch, row); };
  for (int64_t r = 0; r < num_rows; ++r) {
    const TokenRange range = RowTokenRange(params, r);
    for (int64_t i = range.begin; i < range.end; ++i) {
      if (!IsWrittenToken(params, i)) continue;  // skipped: the chain does not advance
      ++written;
      const int64_t slot = params.out_cache_loc[i];
      const int64_t token = params.input_ids[i];
      const int64_t position = params.positions[i];
      const int64_t prev_hash = AdvanceChain(params, i, slot, token, position, &chains[r], record);
      const int64_t real_kv_hash = real_kv_hashes.empty() ? 0 : ToSigned(real_kv_hashes[i]);
      StoreRecord(RecordAddress(launch, slot), Record{token, position, prev_hash, real_kv_hash});
    }
  }
  *launch.slot_run_counter = WrapAdd(*launch.slot_run_counter, written);
}

}  // namespace kvcanary::cpu
