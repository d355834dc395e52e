// Shared code of the property tests (test_properties_*.cpp, test_fused_verify.cpp): the real-KV
// and slot-hash oracles, the KV sources and canary-state helpers built on them, and, through
// property_plan_oracle.h, seeded randomness, the plan oracle and the runner of the plan ops. The
// oracles are written from SGLang's kv-canary pseudo-code, never by calling library internals.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "property_plan_oracle.h"
#include "testutil.h"

namespace kvcanary::testing {

// ---------------------------------------------------------------------------------------------
// Real-KV oracle.

struct KvSource {
  HostTensor<uint8_t> bytes;  // [rows, dim1_bytes]
  int64_t page_size = 1;
  int64_t bytes_per_token = 16;
  int64_t read_bytes = 16;

  RealKvSource View() const {
    return RealKvSource{bytes.view(), page_size, bytes_per_token, read_bytes};
  }
  bool HasRow(int64_t slot) const { return slot / page_size < bytes.shape()[0]; }
  int64_t StripOffset(int64_t slot) const {
    return slot / page_size * bytes.shape()[1] + slot % page_size * bytes_per_token;
  }
};

inline int64_t FoldBytes(const KvSource& source, RealKvHashMode mode) {
  if (mode == RealKvHashMode::kNone) return 0;
  return mode == RealKvHashMode::kPartial ? 16 : source.read_bytes;
}

inline uint64_t LittleEndianWord(const uint8_t* bytes) {
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = word << 8 | bytes[i];
  return word;
}

inline uint64_t OracleRealKv(const std::vector<KvSource>& sources, RealKvHashMode mode,
                             int64_t slot) {
  if (mode == RealKvHashMode::kNone || sources.empty()) return 0;
  uint64_t acc = 0;
  for (const KvSource& source : sources) {
    uint64_t hash = 0;
    if (source.HasRow(slot)) {
      const uint8_t* strip = source.bytes.values().data() + source.StripOffset(slot);
      for (int64_t off = 0; off < FoldBytes(source, mode); off += 16) {
        hash = Splitmix64(hash ^ LittleEndianWord(strip + off));
        hash = Splitmix64(hash ^ LittleEndianWord(strip + off + 8));
      }
    }
    acc = Splitmix64(acc ^ hash);
  }
  return acc;
}

// 1-3 random-byte sources covering `num_slots` slots, some rows wider than the slots need.
inline std::vector<KvSource> RandomSources(Rng& rng, int64_t num_slots) {
  std::vector<KvSource> sources(rng.Uniform(1, 3));
  for (KvSource& source : sources) {
    source.page_size = int64_t{1} << rng.Uniform(0, 2);
    source.bytes_per_token = 16 * rng.Uniform(1, 3);
    source.read_bytes = 16 * rng.Uniform(1, source.bytes_per_token / 16);
    const int64_t rows = (num_slots + source.page_size - 1) / source.page_size;
    const int64_t dim1 = source.page_size * source.bytes_per_token + 16 * rng.Uniform(0, 1);
    source.bytes = HostTensor<uint8_t>({rows, dim1});
    rng.FillBytes(source.bytes);
  }
  return sources;
}

inline LaunchContext ContextWith(const CanaryState& state, const std::vector<KvSource>& sources,
                                 RealKvHashMode mode) {
  LaunchContext context = state.Context();
  for (size_t i = 0; i < sources.size(); ++i) context.real_kv_sources[i] = sources[i].View();
  context.num_real_kv_sources = static_cast<int>(sources.size());
  context.real_kv_hash_mode = static_cast<int32_t>(mode);
  return context;
}

inline RealKvHashMode ModeOf(int64_t i) { return static_cast<RealKvHashMode>(i % 3); }

// A canary slot stride of 32..48 bytes (docs/format.md: >= 32, not necessarily a multiple of 8).
inline int64_t RandomStride(uint64_t seed) {
  return kCanarySlotBytes + static_cast<int64_t>(seed % 17);
}

// Bytes [32, stride) of every slot, which no op may write.
inline std::vector<uint8_t> SlotTails(const CanaryState& state) {
  const int64_t stride = state.canary.shape()[1];
  std::vector<uint8_t> tails;
  for (int64_t s = 0; s < state.canary.shape()[0]; ++s) {
    const uint8_t* slot = state.canary.values().data() + s * stride;
    tails.insert(tails.end(), slot + kCanarySlotBytes, slot + stride);
  }
  return tails;
}

inline void FillSlotTails(Rng& rng, CanaryState& state) {
  const int64_t stride = state.canary.shape()[1];
  for (int64_t s = 0; s < state.canary.shape()[0]; ++s) {
    for (int64_t b = kCanarySlotBytes; b < stride; ++b) {
      state.canary.values()[s * stride + b] = static_cast<uint8_t>(rng.Uniform(1, 255));
    }
  }
}

// slot_hash of a stored record, through the chain step.
inline uint64_t OracleSlotHash(const Record& record) {
  return ChainStep(ToUnsigned(record.prev_hash), record.token, record.position);
}

}  // namespace kvcanary::testing
