// The CPU verify's check of a block of entries: CheckEntry's result for each, computed with the
// hashes of the whole block in lanes, so the arithmetic of several entries runs at once (SIMD where
// the CPU has 64-bit vector multiplies) instead of one splitmix chain after another.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/verify_entry.h"

namespace kvcanary::cpu {

// The most entries one CheckBlock call takes.
inline constexpr int kCheckBlockEntries = 128;

// A failing entry of a block: its index in the block and the row CheckEntry would give.
struct BlockFailure {
  int index = 0;
  ViolationRow row;
};

// Checks entries[0, count) (1 <= count <= kCheckBlockEntries) exactly as CheckEntry would each,
// fills failures[0, k) with the failing ones in order and returns k.
int CheckBlock(const LaunchParams& launch, bool check_token, const VerifyEntry* entries, int count,
               BlockFailure* failures);

}  // namespace kvcanary::cpu
