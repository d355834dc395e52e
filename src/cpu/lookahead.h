// The CPU verify's lookahead: the entries of a chunk derived a block ahead of their check, and
// the records and real-KV strips of each derived block prefetched in one burst.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/params.h"
#include "core/real_kv.h"
#include "core/verify_entry.h"
#include "core/verify_math.h"
#include "cpu/check_block.h"
#include "cpu/prefetch.h"

namespace kvcanary::cpu {

// Entries are derived a block at a time, one block ahead of the check, and the records and real-KV
// strips of a derived block are then prefetched back to back. Every entry costs a few random cache
// misses (its record, one strip per layer of each source); prefetches spread among the check's
// instructions leave the core waiting on one miss at a time, while a burst keeps many in flight.
// How large a burst pays depends on how many instructions the check puts between bursts: with the
// screen in CheckBlock (a few dozen an entry) bursts of 128 lines beat 64, 32 and 16 on the 2-core
// EPYC development machine. A block holds as many entries as fit its burst, a power of two (blocks
// then never straddle the ring's end).
constexpr int64_t kBurstLines = 128;
constexpr int64_t kLookaheadSlots = 2 * kCheckBlockEntries;

// The launches a verify checks against the same entries: one, or the K and V halves of a paired
// launch, whose entries are then derived (and their lines prefetched) once for both.
struct Launches {
  const LaunchParams* of[kMaxHalves] = {};
  int count = 0;
};

// The entries per block: the largest power of two <= kCheckBlockEntries whose lines (for each
// launch a record and a strip per layer of each source, per entry) fit in a burst; at least 1.
inline int64_t BlockEntriesFor(const Launches& launches) {
  int64_t lines = 0;
  for (int l = 0; l < launches.count; ++l) {
    const RealKvParams& real_kv = launches.of[l]->real_kv;
    lines += 1;
    for (int32_t i = 0; i < real_kv.num_sources; ++i) {
      lines += std::min<int64_t>(real_kv.sources[i].num_layers, kBurstLines);
    }
  }
  int64_t block = kCheckBlockEntries;
  while (block > 1 && block * lines > kBurstLines) block /= 2;
  return block;
}

// Asks for the real-KV strips a fingerprint of `slot` will fold (each layer of each source).
inline void PrefetchRealKv(const RealKvParams& real_kv, int64_t slot) {
  for (int32_t i = 0; i < real_kv.num_sources; ++i) {
    const RealKvSourceParams& source = real_kv.sources[i];
    const int64_t offset = StripOffset(source, slot);
    if (offset < 0) continue;
    for (int64_t layer = 0; layer < source.num_layers; ++layer) {
      PrefetchLine(LayerBase(source, layer) + offset);
    }
  }
}

// Asks for the record and strips CheckBlock will read for `entry` (a hint only; results cannot
// change).
inline void PrefetchEntry(const LaunchParams& launch, const VerifyEntry& entry) {
  if (!IsCheckedSlot(launch, entry.slot)) return;
  PrefetchLine(launch.canary + entry.slot * launch.slot_stride_bytes);
  PrefetchRealKv(launch.real_kv, entry.slot);
}

// The lines PrefetchEntry asks for, as a base and a stride each, worked out once a launch: a slot's
// record, and its strip in each layer of each source, for each launch. Each burst entry then costs
// a multiply and a prefetch a line instead of PrefetchEntry's walk over the sources. That count
// matters: while a burst's first prefetches wait on their page walks nothing after them retires,
// so the fewer instructions an entry, the more of the burst is in flight by then. Sources paged in
// pages of more than one token or with fewer rows than the pool has slots, and launches over pools
// of different sizes, keep PrefetchEntry.
class SlotLines {
 public:
  explicit SlotLines(const Launches& launches) : launches_(launches) {
    for (int l = 0; l < launches.count && !fallback_; ++l) AddLaunch(*launches.of[l]);
  }
  void Prefetch(const VerifyEntry& entry) const {
    if (fallback_) {
      for (int l = 0; l < launches_.count; ++l) PrefetchEntry(*launches_.of[l], entry);
      return;
    }
    if (!IsCheckedSlot(*launches_.of[0], entry.slot)) return;
    const auto slot = static_cast<uintptr_t>(entry.slot);
    PrefetchLine(reinterpret_cast<const void*>(base_[0] + slot * stride_[0]));
    for (int i = 1; i < count_; ++i) {
      PrefetchLine(reinterpret_cast<const void*>(base_[i] + slot * stride_[i]));
    }
  }

 private:
  static constexpr int kMaxLines = 8;
  void AddLaunch(const LaunchParams& launch) {
    fallback_ |= launch.num_slots != launches_.of[0]->num_slots;
    Add(launch.canary, launch.slot_stride_bytes);
    for (int32_t i = 0; i < launch.real_kv.num_sources && !fallback_; ++i) {
      const RealKvSourceParams& source = launch.real_kv.sources[i];
      fallback_ |= source.page_size != 1 || source.rows < launch.num_slots;
      for (int64_t layer = 0; layer < source.num_layers && !fallback_; ++layer) {
        Add(LayerBase(source, layer), source.row_stride_bytes);
      }
    }
  }
  void Add(const uint8_t* base, int64_t stride) {
    if (count_ == kMaxLines) {
      fallback_ = true;
      return;
    }
    base_[count_] = reinterpret_cast<uintptr_t>(base);
    stride_[count_] = static_cast<uintptr_t>(stride);
    ++count_;
  }
  Launches launches_;
  uintptr_t base_[kMaxLines] = {};
  uintptr_t stride_[kMaxLines] = {};
  int count_ = 0;
  bool fallback_ = false;
};

// Entries [first, end) of a chunk, each derived once, one block ahead of its check. The cursor's
// At(e) gives entry e (asked for in increasing e from `first`); its SparsePredecessors() says
// whether many entries take a predecessor other than the entry before them (a sampled verify).
template <typename Cursor>
class Lookahead {
 public:
  Lookahead(const Launches& launches, Cursor cursor, int64_t first, int64_t end)
      : launches_(launches),
        lines_(launches),
        cursor_(cursor),
        block_(BlockEntriesFor(launches)),
        first_(first),
        end_(end),
        next_(first) {
    DeriveBlock();
    DeriveBlock();
  }
  int64_t block() const { return block_; }
  // The block of entries [e, min(e + block(), end)), asked for in increasing e from `first` in
  // steps of block(); derives the block after the next.
  const VerifyEntry* TakeBlock(int64_t e) {
    if (e != first_) DeriveBlock();
    return &ring_[(e - first_) & (kLookaheadSlots - 1)];
  }

 private:
  void DeriveBlock() {
    const int64_t block_first = next_;
    const int64_t block_end = std::min(end_, block_first + block_);
    for (; next_ < block_end; ++next_) {
      ring_[(next_ - first_) & (kLookaheadSlots - 1)] = cursor_.At(next_);
    }
    // The burst's loop does nothing else: while its first misses hold up retirement, the fewer
    // instructions an entry, the more of the burst's prefetches are already in flight.
    for (int64_t e = block_first; e < block_end; ++e) {
      lines_.Prefetch(ring_[(e - first_) & (kLookaheadSlots - 1)]);
    }
    // Then the predecessors that are not the previous entry (the first of each run of a sampled
    // row, one entry in 16). A full verify's are its rows' first entries only, too few to pay for
    // this second pass (about 5% of a `none` verify), so a fused full verify skips it.
    if (!cursor_.SparsePredecessors()) return;
    int64_t previous_slot = previous_slot_;
    for (int64_t e = block_first; e < block_end; ++e) {
      const VerifyEntry& entry = ring_[(e - first_) & (kLookaheadSlots - 1)];
      for (int l = 0; l < launches_.count && entry.prev_slot != previous_slot; ++l) {
        const LaunchParams& launch = *launches_.of[l];
        if (!IsCheckedSlot(launch, entry.prev_slot)) continue;
        PrefetchLine(launch.canary + entry.prev_slot * launch.slot_stride_bytes);
      }
      previous_slot = entry.slot;
    }
    previous_slot_ = previous_slot;
  }
  Launches launches_;
  SlotLines lines_;
  Cursor cursor_;
  int64_t block_;
  int64_t first_;
  int64_t end_;
  int64_t next_;
  int64_t previous_slot_ = -1;  // the slot of the entry before the next one prefetched
  VerifyEntry ring_[kLookaheadSlots];
};

}  // namespace kvcanary::cpu
