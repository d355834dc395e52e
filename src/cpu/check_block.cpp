// CheckBlock: the records of a block are loaded lane by lane, the predecessors' hashes and the
// real-KV fingerprints computed over all lanes at once, then each entry's fail bits taken from
// the same EntryFailBits as CheckEntry, so the result cannot differ from it.
#include "cpu/check_block.h"

#include "core/real_kv.h"
#include "core/record.h"
#include "core/verify_math.h"
#include "kvcanary/hash.h"

// The lane loops are pure 64-bit arithmetic; on x86-64 a second copy is built for CPUs with
// 64-bit vector multiplies (AVX-512DQ) and chosen when the library loads. Integer arithmetic
// gives the same bits in either copy.
// Sanitizer builds keep one copy: an ifunc resolver runs before the sanitizer's runtime is set up.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer)
#define KVC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVC_SANITIZED 1
#endif
#if defined(__x86_64__) && defined(__ELF__) && !defined(KVC_SANITIZED)
#define KVC_LANE_LOOP __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define KVC_LANE_LOOP
#endif

namespace kvcanary::cpu {
namespace {

// One 64-bit word per entry of a block; kLanes is 8 or 16 (one or two 512-bit vectors).
template <int kLanes>
struct alignas(64) Lanes {
  static constexpr int kCount = kLanes;
  uint64_t v[kLanes] = {};
};

// out[i] = the slot hash of record (token[i], position[i], prev_hash[i]).
template <typename L>
KVC_LANE_LOOP void RecordHashLanes(const L& token, const L& position, const L& prev_hash, L* out) {
  for (int i = 0; i < L::kCount; ++i) {
    out->v[i] = RecordHash(ToSigned(token.v[i]), ToSigned(position.v[i]), ToSigned(prev_hash.v[i]));
  }
}

template <typename L>
KVC_LANE_LOOP void FoldLanes(const L& lo, const L& hi, L* acc) {
  for (int i = 0; i < L::kCount; ++i) acc->v[i] = FoldRealKvBlock(acc->v[i], lo.v[i], hi.v[i]);
}

template <typename L>
KVC_LANE_LOOP void CombineLanes(const L& source_hash, L* fingerprint) {
  for (int i = 0; i < L::kCount; ++i) {
    fingerprint->v[i] = CombineSourceHash(fingerprint->v[i], source_hash.v[i]);
  }
}

// fingerprint[i] = RealKvFingerprint(real_kv, slot of entry i) for each checked entry. A strip
// outside its source folds as zeros, which gives SourceHash's 0: splitmix64 fixes 0.
template <typename L>
void FingerprintLanes(const RealKvParams& real_kv, const VerifyEntry* entries, const bool* checked,
                      int count, L* fingerprint) {
  for (int32_t s = 0; s < real_kv.num_sources; ++s) {
    const RealKvSourceParams& source = real_kv.sources[s];
    int64_t offsets[kCheckBlockEntries];
    for (int i = 0; i < count; ++i) {
      offsets[i] = checked[i] ? StripOffset(source, entries[i].slot) : -1;
    }
    for (int64_t layer = 0; layer < source.num_layers; ++layer) {
      const uint8_t* base = LayerBase(source, layer);
      L acc;
      for (int64_t at = 0; at < source.fold_bytes; at += kRealKvBlockBytes) {
        L lo, hi;
        for (int i = 0; i < count; ++i) {
          if (offsets[i] >= 0) LoadBlock16(base + offsets[i] + at, &lo.v[i], &hi.v[i]);
        }
        FoldLanes(lo, hi, &acc);
      }
      CombineLanes(acc, fingerprint);
    }
  }
}

template <int kLanes>
int CheckLanes(const LaunchParams& launch, bool check_token, const VerifyEntry* entries, int count,
               BlockFailure* failures) {
  using L = Lanes<kLanes>;
  bool checked[kCheckBlockEntries];
  Record stored[kCheckBlockEntries];
  L pred_token, pred_position, pred_prev_hash, pred_hash, fingerprint;
  for (int i = 0; i < count; ++i) {
    const VerifyEntry& entry = entries[i];
    checked[i] = IsCheckedSlot(launch, entry.slot);
    if (!checked[i]) continue;
    stored[i] = LoadRecord(launch.canary + entry.slot * launch.slot_stride_bytes);
    // A reachable predecessor in the pool (not the head, -1): its record's hash is the expectation.
    if (entry.prev_slot > 0 && entry.prev_slot < launch.num_slots) {
      const Record pred = LoadRecord(launch.canary + entry.prev_slot * launch.slot_stride_bytes);
      pred_token.v[i] = ToUnsigned(pred.token);
      pred_position.v[i] = ToUnsigned(pred.position);
      pred_prev_hash.v[i] = ToUnsigned(pred.prev_hash);
    }
  }
  RecordHashLanes(pred_token, pred_position, pred_prev_hash, &pred_hash);
  FingerprintLanes(launch.real_kv, entries, checked, count, &fingerprint);
  int failing = 0;
  for (int i = 0; i < count; ++i) {
    if (!checked[i]) continue;
    const VerifyEntry& entry = entries[i];
    const bool reachable = IsReachablePredecessor(launch, entry.prev_slot);
    const int64_t expected_hash =
        !reachable ? stored[i].prev_hash
                   : ToSigned(entry.prev_slot < 0 ? ChainHeadHash() : pred_hash.v[i]);
    const int64_t bits =
        EntryFailBits(check_token, entry, stored[i], reachable, expected_hash, fingerprint.v[i]);
    if (bits == 0) continue;
    failures[failing++] =
        BlockFailure{i, EntryViolation(launch, entry, stored[i], expected_hash, bits)};
  }
  return failing;
}

}  // namespace

int CheckBlock(const LaunchParams& launch, bool check_token, const VerifyEntry* entries, int count,
               BlockFailure* failures) {
  // The narrower lanes when they hold the block: half the arithmetic for blocks of <= 8.
  return count <= 8 ? CheckLanes<8>(launch, check_token, entries, count, failures)
                    : CheckLanes<kCheckBlockEntries>(launch, check_token, entries, count, failures);
}

}  // namespace kvcanary::cpu
