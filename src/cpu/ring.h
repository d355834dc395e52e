// Recording violation rows on the CPU: reserve seq = write_index++, store the
// row when seq lies in [0, capacity), drop it otherwise. Single-threaded: callers collect rows in
// parallel and record them in order, so the ring order is deterministic.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/params.h"
#include "core/record.h"

namespace kvcanary::cpu {

inline void RecordViolation(const LaunchParams& launch, const ViolationRow& row) {
  const int32_t seq = *launch.write_index;
  // The index keeps counting past the capacity; unsigned arithmetic keeps a wrap defined.
  *launch.write_index = static_cast<int32_t>(static_cast<uint32_t>(seq) + 1u);
  if (seq >= 0 && seq < launch.ring_capacity) {
    std::memcpy(launch.ring + int64_t{seq} * kViolationFields, &row, sizeof(row));
  }
}

// `count` rows past the ring: the index advances as `count` RecordViolation calls would (mod 2^32).
inline void CountDroppedViolations(const LaunchParams& launch, int64_t count) {
  const auto seq = static_cast<uint32_t>(*launch.write_index);
  *launch.write_index = static_cast<int32_t>(seq + static_cast<uint32_t>(count));
}

inline void RecordViolations(const LaunchParams& launch, const std::vector<ViolationRow>& rows) {
  for (const ViolationRow& row : rows) RecordViolation(launch, row);
}

}  // namespace kvcanary::cpu
