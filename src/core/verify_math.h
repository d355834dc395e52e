// The check of one verify entry, shared by both backends, and the entries the
// fused verify derives from the plan inputs.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/plan_math.h"
#include "core/real_kv.h"
#include "core/record.h"
#include "core/verify_entry.h"
#include "core/wrap.h"
#include "kvcanary/hash.h"

namespace kvcanary {

// An entry whose slot is the padding slot or past the pool is skipped (D1, D7).
KVC_HOST_DEVICE bool IsCheckedSlot(const LaunchParams& launch, int64_t slot) {
  return slot > kTokenToKvSlotPadding && slot < launch.num_slots;
}

// The chain check runs only when the predecessor is the head (-1) or a slot of the pool.
KVC_HOST_DEVICE bool IsReachablePredecessor(const LaunchParams& launch, int64_t prev_slot) {
  return prev_slot != 0 && prev_slot < launch.num_slots;
}

// What the record of a reachable predecessor hashes to (the head hash for -1).
KVC_HOST_DEVICE uint64_t PredecessorHash(const LaunchParams& launch, int64_t prev_slot) {
  return prev_slot < 0
             ? ChainHeadHash()
             : RecordHash(LoadRecord(launch.canary + prev_slot * launch.slot_stride_bytes));
}

// The fail bits of a checked entry whose record is `stored`. expected_hash is the predecessor's
// hash as a signed word (any value when the predecessor is unreachable: no chain check then);
// fingerprint is RealKvFingerprint of the entry's slot.
KVC_HOST_DEVICE int64_t EntryFailBits(bool check_token, const VerifyEntry& entry,
                                      const Record& stored, bool reachable, int64_t expected_hash,
                                      uint64_t fingerprint) {
  int64_t bits = 0;
  if (reachable && stored.prev_hash != expected_hash) bits |= FailReason::kVerifyChainHashMismatch;
  if (check_token && entry.expected_token != -1 && stored.token != entry.expected_token) {
    bits |= FailReason::kVerifyTokenMismatch;
  }
  if (stored.position != entry.position) bits |= FailReason::kVerifyPositionMismatch;
  if (stored.real_kv_hash != ToSigned(fingerprint)) bits |= FailReason::kVerifyRealKvHashMismatch;
  return bits;
}

// The violation row of a failing entry.
KVC_HOST_DEVICE ViolationRow EntryViolation(const LaunchParams& launch, const VerifyEntry& entry,
                                            const Record& stored, int64_t expected_hash,
                                            int64_t bits) {
  return ViolationRow{launch.kernel_kind,   entry.slot,       stored.position, stored.token,
                      entry.expected_token, stored.prev_hash, expected_hash,   bits};
}

// Checks one entry, loading its record and its predecessor's. Returns the fail bits (0 when it
// passes or is skipped) and, when non-zero, fills `row` with the violation to record.
KVC_HOST_DEVICE int64_t CheckEntry(const LaunchParams& launch, bool check_token,
                                   const VerifyEntry& entry, ViolationRow* row) {
  if (!IsCheckedSlot(launch, entry.slot)) return 0;
  const Record stored = LoadRecord(launch.canary + entry.slot * launch.slot_stride_bytes);
  const bool reachable = IsReachablePredecessor(launch, entry.prev_slot);
  const int64_t expected_hash =
      reachable ? ToSigned(PredecessorHash(launch, entry.prev_slot)) : stored.prev_hash;
  const int64_t bits = EntryFailBits(check_token, entry, stored, reachable, expected_hash,
                                     RealKvFingerprint(launch.real_kv, entry.slot));
  if (bits != 0) *row = EntryViolation(launch, entry, stored, expected_hash, bits);
  return bits;
}

// Entry e of a plan's arrays (the expected token counts only when the check is on).
KVC_HOST_DEVICE VerifyEntry StoredEntry(const StoredEntryParams& s, bool check_token, int64_t e) {
  return VerifyEntry{s.slot_indices[e], s.prev_slot_indices[e], s.expected_positions[e],
                     check_token ? s.expected_tokens[e] : -1};
}

KVC_HOST_DEVICE StoredEntryParams StoredEntriesOf(const VerifyParams& p) {
  return StoredEntryParams{p.slot_indices, p.expected_tokens, p.expected_positions,
                           p.prev_slot_indices, p.capacity};
}

KVC_HOST_DEVICE VerifyEntry PlannedEntry(const VerifyParams& p, int64_t e) {
  return StoredEntry(StoredEntriesOf(p), p.check_token, e);
}

// The entries the fused verify checks: [0, n) with n as verify reads it from a plan stage 1
// wrote (none when disabled; none for an empty batch).
KVC_HOST_DEVICE int64_t FusedEntryCount(const FusedVerifyParams& p) {
  const int32_t enable = *p.enable;
  const int32_t num_valid = *p.num_valid;  // loaded with enable, not after it
  if (enable == 0 || p.in.bs <= 0) return 0;
  return ClampCount(num_valid, p.capacity);  // D2
}

// Whether a fused verify of n entries reads them from its stored entries instead of deriving
// them.
KVC_HOST_DEVICE bool ReadsStoredEntries(const FusedVerifyParams& p, int64_t n) {
  return p.stored.slot_indices != nullptr && n <= p.stored.capacity;
}

// The entry of batch row r (req_to_token row rp) at `position` exactly as the plan-entries stage
// would store it. previous_entry_slot, when given, is the slot of position - 1 of the same row (the
// entry before it, when adjacent), so it is the predecessor.
KVC_HOST_DEVICE VerifyEntry FusedEntryOfRow(const FusedVerifyParams& p, int64_t r, int64_t rp,
                                            int64_t position,
                                            const int64_t* previous_entry_slot = nullptr) {
  VerifyEntry entry = DeriveVerifyEntry(p.in, rp, position, previous_entry_slot);
  entry.expected_token = p.check_token ? ExpectedToken(p.in.pool, r, rp, position) : -1;
  return entry;
}

KVC_HOST_DEVICE VerifyEntry FusedEntryAt(const FusedVerifyParams& p, int64_t r, int64_t position,
                                         const int64_t* previous_entry_slot = nullptr) {
  return FusedEntryOfRow(p, r, p.in.req_pool_indices[r], position, previous_entry_slot);
}

}  // namespace kvcanary
