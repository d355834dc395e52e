// One verify entry: what a plan stores per prefix record to check, and what
// the fused verify derives in the kernel instead.
#pragma once

#include <cstdint>

namespace kvcanary {

struct VerifyEntry {
  int64_t slot = 0;             // canary slot to check (SWA-translated)
  int64_t prev_slot = -1;       // predecessor slot; -1 head, 0 unreachable
  int64_t position = 0;         // expected position
  int64_t expected_token = -1;  // -1: do not check the token
};

}  // namespace kvcanary
