// CheckBlock: a block is first screened (BlockPasses): its records loaded lane by lane, their
// hashes and the real-KV fingerprints computed over all lanes at once, and every entry compared.
// Nearly every block passes, and then nothing more is done. A block that does not is checked again
// in narrower blocks by CheckLanes, which takes each entry's fail bits from the same EntryFailBits
// as CheckEntry, so the rows cannot differ from it.
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

// The same words left uninitialised, for lanes the caller fills itself: zeroing five blocks of
// lanes was a fifth of the screen's time.
template <int kLanes>
struct alignas(64) RawLanes {
  static constexpr int kCount = kLanes;
  uint64_t v[kLanes];
};

// CheckLanes' width: it runs only on blocks that hold a failure.
constexpr int kNamingLanes = 16;

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
  bool checked[kLanes];
  Record stored[kLanes];
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

// True when every entry of the block passes (EntryFailBits 0 for each checked entry; a skipped
// slot passes, as CheckEntry skips it); false when some entry fails. An entry whose predecessor is
// the checked entry before it (every entry but a row's first, in a full verify) takes that entry's
// record hash, computed in the lanes from the record already loaded: one hash an entry and no
// second record read. Other entries hash their predecessor's record one by one, as CheckEntry
// does.
template <int kLanes>
bool BlockPasses(const LaunchParams& launch, bool check_token, const VerifyEntry* entries,
                 int count) {
  using L = RawLanes<kLanes>;
  L token, position, prev_hash, own_hash, real_kv_hash;
  bool checked[kLanes];
  bool fails = false;
  for (int i = 0; i < count; ++i) {
    const VerifyEntry& entry = entries[i];
    checked[i] = IsCheckedSlot(launch, entry.slot);
    if (!checked[i]) {
      token.v[i] = position.v[i] = prev_hash.v[i] = real_kv_hash.v[i] = 0;
      continue;
    }
    const uint8_t* record = launch.canary + entry.slot * launch.slot_stride_bytes;
    token.v[i] = LoadLeU64(record);
    position.v[i] = LoadLeU64(record + 8);
    prev_hash.v[i] = LoadLeU64(record + 16);
    real_kv_hash.v[i] = LoadLeU64(record + 24);
    fails |= ToSigned(position.v[i]) != entry.position;
    fails |=
        check_token && entry.expected_token != -1 && ToSigned(token.v[i]) != entry.expected_token;
  }
  for (int i = count; i < kLanes; ++i) token.v[i] = position.v[i] = prev_hash.v[i] = 0;
  if (fails) return false;
  RecordHashLanes(token, position, prev_hash, &own_hash);
  for (int i = 0; i < count; ++i) {
    if (!checked[i]) continue;
    const int64_t prev_slot = entries[i].prev_slot;
    if (i > 0 && checked[i - 1] && prev_slot == entries[i - 1].slot) {
      fails |= prev_hash.v[i] != own_hash.v[i - 1];
    } else if (IsReachablePredecessor(launch, prev_slot)) {
      fails |= prev_hash.v[i] != PredecessorHash(launch, prev_slot);
    }
  }
  if (launch.real_kv.num_sources == 0) {
    for (int i = 0; i < count; ++i) fails |= real_kv_hash.v[i] != 0;
    return !fails;
  }
  Lanes<kLanes> fingerprint;
  FingerprintLanes(launch.real_kv, entries, checked, count, &fingerprint);
  for (int i = 0; i < count; ++i) fails |= checked[i] && real_kv_hash.v[i] != fingerprint.v[i];
  return !fails;
}

// The narrowest lanes that hold `count` entries.
bool Passes(const LaunchParams& launch, bool check_token, const VerifyEntry* entries, int count) {
  if (count <= 16) return BlockPasses<16>(launch, check_token, entries, count);
  if (count <= 32) return BlockPasses<32>(launch, check_token, entries, count);
  if (count <= 64) return BlockPasses<64>(launch, check_token, entries, count);
  return BlockPasses<kCheckBlockEntries>(launch, check_token, entries, count);
}

}  // namespace

int CheckBlock(const LaunchParams& launch, bool check_token, const VerifyEntry* entries, int count,
               BlockFailure* failures) {
  if (Passes(launch, check_token, entries, count)) return 0;
  int failing = 0;
  for (int first = 0; first < count; first += kNamingLanes) {
    const int part = count - first < kNamingLanes ? count - first : kNamingLanes;
    // The narrower lanes when they hold the part: half the arithmetic for parts of <= 8.
    const int found =
        part <= 8 ? CheckLanes<8>(launch, check_token, entries + first, part, failures + failing)
                  : CheckLanes<kNamingLanes>(launch, check_token, entries + first, part,
                                             failures + failing);
    for (int k = failing; k < failing + found; ++k) failures[k].index += first;
    failing += found;
  }
  return failing;
}

}  // namespace kvcanary::cpu
