#include "kvcanary/format.h"

namespace kvcanary {

const char* LaunchTagName(int64_t tag) {
  static const char* const kNames[kNumLaunchTags] = {
      "HEAD_K_FULL", "HEAD_V_FULL", "TAIL_K_FULL", "TAIL_V_FULL", "SWEEP_K_FULL", "SWEEP_V_FULL",
      "HEAD_K_SWA",  "HEAD_V_SWA",  "TAIL_K_SWA",  "TAIL_V_SWA",  "SWEEP_K_SWA",  "SWEEP_V_SWA"};
  return tag >= 0 && tag < kNumLaunchTags ? kNames[tag] : nullptr;
}

const char* FailReasonLabel(int64_t bit) {
  switch (bit) {
    case FailReason::kVerifyChainHashMismatch: return "verify_chain_hash";
    case FailReason::kVerifyPositionMismatch: return "verify_position";
    case FailReason::kVerifyRealKvHashMismatch: return "verify_real_kv_hash";
    case FailReason::kWriteTokenMismatch: return "write_token";
    case FailReason::kWritePositionMismatch: return "write_position";
    case FailReason::kVerifyTokenMismatch: return "verify_token";
    default: return nullptr;
  }
}

}  // namespace kvcanary
