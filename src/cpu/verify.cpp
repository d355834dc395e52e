// CPU reference of the verify operation (spec/kernels.md §8). Entries are checked in parallel
// chunks; each chunk keeps its rows and the rows are recorded in entry order afterwards.
#include <vector>

#include "core/verify_math.h"
#include "core/wrap.h"
#include "cpu/backend.h"
#include "cpu/parallel.h"
#include "cpu/ring.h"

namespace kvcanary::cpu {
namespace {

constexpr int64_t kPrefetchDistance = 16;

void PrefetchRecord(const VerifyParams& params, int64_t e) {
  const int64_t slot = params.slot_indices[e];
  if (slot > 0 && slot < params.launch.num_slots) {
    __builtin_prefetch(params.launch.canary + slot * params.launch.slot_stride_bytes);
  }
}

}  // namespace

void Verify(const VerifyParams& params) {
  const LaunchParams& launch = params.launch;
  *launch.kernel_run_counter = WrapAdd(*launch.kernel_run_counter, 1);
  if (*params.enable == 0) return;
  const int64_t n = ClampCount(*params.num_valid, params.capacity);  // D2
  *launch.slot_run_counter = WrapAdd(*launch.slot_run_counter, n);

  const int chunks = ChunkCount(n);
  std::vector<std::vector<ViolationRow>> found(chunks);
  ForEachChunk(n, chunks, [&](int chunk, int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      // Records are random 32-byte reads: asking for the one kPrefetchDistance entries ahead keeps
      // several cache misses in flight instead of one (a hint only; results cannot change).
      if (e + kPrefetchDistance < end) PrefetchRecord(params, e + kPrefetchDistance);
      ViolationRow row;
      if (CheckVerifyEntry(params, e, &row) != 0) found[chunk].push_back(row);
    }
  });
  for (const std::vector<ViolationRow>& rows : found) RecordViolations(launch, rows);
}

}  // namespace kvcanary::cpu
