// The CPU verify checks entries a block at a time with the hashes computed in lanes (CheckBlock);
// CheckEntry, one entry at a time, is the formula both backends share. On random blocks that mix
// every case (skipped slots, head, unreachable and in-pool predecessors, corrupted words, strips
// past their source's rows, paged and layered sources, several fold lengths) the two must name
// the same failing entries with the same rows. Blocks of valid chains (as a verify of consecutive
// positions reads them, where CheckBlock's screen takes each predecessor hash from the entry
// before) with a few corruptions must do the same.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/record.h"
#include "core/verify_math.h"
#include "cpu/check_block.h"

namespace kvcanary::testing {
namespace {

using cpu::BlockFailure;
using cpu::CheckBlock;
using cpu::kCheckBlockEntries;

constexpr int64_t kStride = 48;  // records need not be packed

class CheckBlockFixture {
 public:
  // slots - 1 usable slots (slot 0 is the padding slot).
  explicit CheckBlockFixture(uint64_t seed, int64_t slots = 96)
      : num_slots_(slots), rng_(seed), canary_(slots * kStride) {
    for (int64_t slot = 0; slot < num_slots_; ++slot) WriteRecord(slot);
    launch_.canary = canary_.data();
    launch_.num_slots = num_slots_;
    launch_.slot_stride_bytes = kStride;
    launch_.kernel_kind = 7;
    AddSources();
  }

  // A random entry: slots and predecessors both in and out of the pool, positions and tokens that
  // mostly match the stored record.
  VerifyEntry RandomEntry() {
    VerifyEntry entry;
    entry.slot = Pick(-2, num_slots_ + 2);
    const int kind = static_cast<int>(Pick(0, 3));
    entry.prev_slot = kind == 0 ? -1 : kind == 1 ? 0 : Pick(-3, num_slots_ + 3);
    const Record stored = StoredAt(entry.slot);
    entry.position = Pick(0, 9) == 0 ? stored.position + 1 : stored.position;
    entry.expected_token = Pick(0, 4) == 0 ? -1 : Pick(0, 9) == 0 ? stored.token ^ 1 : stored.token;
    return entry;
  }

  // The entries of a verify of `length` consecutive positions of one row: records in distinct
  // random slots, chained and fingerprinted as writes leave them; the row starts at position 0 or
  // later (its first entry's predecessor then a slot of the row too).
  std::vector<VerifyEntry> ValidChain(int length) {
    const int64_t skipped = Pick(0, 1) == 0 ? 0 : Pick(1, 5);  // positions before the first entry
    std::vector<int64_t> slots(static_cast<size_t>(num_slots_ - 1));
    std::iota(slots.begin(), slots.end(), 1);
    std::shuffle(slots.begin(), slots.end(), rng_);
    std::vector<VerifyEntry> entries;
    uint64_t prev_hash = ChainHeadHash();
    for (int64_t position = 0; position < skipped + length; ++position) {
      const int64_t slot = slots[static_cast<size_t>(position)];
      const Record record{Pick(0, 1000), position, ToSigned(prev_hash),
                          ToSigned(RealKvFingerprint(launch_.real_kv, slot))};
      std::memcpy(canary_.data() + slot * kStride, &record, sizeof(record));
      prev_hash = RecordHash(record);
      if (position < skipped) continue;
      const int64_t prev_slot = position == 0 ? -1 : slots[static_cast<size_t>(position - 1)];
      entries.push_back(VerifyEntry{slot, prev_slot, position, record.token});
    }
    return entries;
  }

  // One corruption of a chain: a record word, a strip byte, or an entry's slot, predecessor,
  // position or expected token.
  void Corrupt(std::vector<VerifyEntry>* entries) {
    VerifyEntry& entry = (*entries)[static_cast<size_t>(Pick(0, entries->size() - 1))];
    const int64_t word = Pick(0, 3);
    switch (Pick(0, 6)) {
      case 0:
        canary_[entry.slot * kStride + 8 * word + Pick(0, 7)] ^= 1 << Pick(0, 7);
        break;
      case 1:
        FlipStripByte(entry.slot);
        break;
      case 2:
        entry.slot = Pick(0, 1) == 0 ? 0 : num_slots_ + word;
        break;
      case 3:
        entry.prev_slot = word == 0 ? 0 : word == 1 ? -1 : Pick(1, num_slots_ - 1);
        break;
      case 4:
        entry.position += 1;
        break;
      default:
        entry.expected_token ^= 1;
        break;
    }
  }

  const LaunchParams& launch() const { return launch_; }

 private:
  int64_t Pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  // Flips a byte of `slot`'s first fold block in a random layer of a random source, if any.
  void FlipStripByte(int64_t slot) {
    if (launch_.real_kv.num_sources == 0 || slot <= 0 || slot >= num_slots_) return;
    const RealKvSourceParams& source =
        launch_.real_kv.sources[Pick(0, launch_.real_kv.num_sources - 1)];
    const int64_t offset = StripOffset(source, slot);
    if (offset < 0) return;
    auto* base = const_cast<uint8_t*>(LayerBase(source, Pick(0, source.num_layers - 1)));
    base[offset + Pick(0, 15)] ^= 0x10;
  }

  Record StoredAt(int64_t slot) const {
    if (slot <= 0 || slot >= num_slots_) return Record{};
    return LoadRecord(canary_.data() + slot * kStride);
  }

  // Random words; a third of the prev_hash words chain correctly to a random slot, so the chain
  // check passes as well as fails.
  void WriteRecord(int64_t slot) {
    Record record{Pick(0, 1000), Pick(0, 50), static_cast<int64_t>(rng_()),
                  static_cast<int64_t>(rng_())};
    std::memcpy(canary_.data() + slot * kStride, &record, sizeof(record));
  }

  // 0 to 3 sources of 1 to 3 layers, page size 1 or 4, fewer rows than slots (strips past them
  // hash as 0), fold lengths of 1 to 4 blocks; a record's real-KV word sometimes equals its slot's
  // fingerprint.
  void AddSources() {
    const int sources = static_cast<int>(Pick(0, 3));
    for (int s = 0; s < sources; ++s) {
      RealKvSourceParams& source = launch_.real_kv.sources[s];
      source.page_size = Pick(0, 1) == 0 ? 1 : 4;
      source.num_bytes_per_token = 64;
      source.row_stride_bytes = source.page_size * source.num_bytes_per_token;
      source.rows = (num_slots_ - 20) / source.page_size;
      source.fold_bytes = 16 * Pick(1, 4);
      source.num_layers = Pick(1, 3);
      layer_addresses_[s].resize(static_cast<size_t>(source.num_layers));
      for (int64_t layer = 0; layer < source.num_layers; ++layer) {
        bytes_.emplace_back(static_cast<size_t>(source.rows * source.row_stride_bytes));
        for (uint8_t& byte : bytes_.back()) byte = static_cast<uint8_t>(rng_());
        layer_addresses_[s][layer] =
            static_cast<int64_t>(reinterpret_cast<uintptr_t>(bytes_.back().data()));
      }
      source.data =
          reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(layer_addresses_[s][0]));
      source.layer_addresses = source.num_layers > 1 ? layer_addresses_[s].data() : nullptr;
    }
    launch_.real_kv.num_sources = sources;
    for (int64_t slot = 1; slot < num_slots_; ++slot) {
      if (Pick(0, 2) == 0) continue;
      Record record = StoredAt(slot);
      record.real_kv_hash = ToSigned(RealKvFingerprint(launch_.real_kv, slot));
      if (Pick(0, 2) == 0)
        record.prev_hash = ToSigned(RecordHash(StoredAt(Pick(1, num_slots_ - 1))));
      std::memcpy(canary_.data() + slot * kStride, &record, sizeof(record));
    }
  }

  const int64_t num_slots_;  // before rng_ and canary_: the constructor sizes them from it
  std::mt19937_64 rng_;
  std::vector<uint8_t> canary_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<int64_t> layer_addresses_[kMaxRealKvSources];
  LaunchParams launch_;
};

// Checks one block both ways; adds the entries CheckEntry passes and fails to the counts.
void ExpectSameAsCheckEntry(const LaunchParams& launch, const std::vector<VerifyEntry>& entries,
                            bool check_token, const std::string& where, int64_t* passing_seen,
                            int64_t* failing_seen) {
  const int count = static_cast<int>(entries.size());
  BlockFailure failures[kCheckBlockEntries];
  const int failing = CheckBlock(launch, check_token, entries.data(), count, failures);
  int next = 0;
  for (int i = 0; i < count; ++i) {
    ViolationRow expected;
    if (CheckEntry(launch, check_token, entries[i], &expected) == 0) {
      ++*passing_seen;
      continue;
    }
    ++*failing_seen;
    ASSERT_LT(next, failing) << where << " entry " << i << " not reported";
    EXPECT_EQ(failures[next].index, i) << where;
    EXPECT_EQ(std::memcmp(&failures[next].row, &expected, sizeof(expected)), 0)
        << where << " entry " << i << " bits " << expected.fail_reason_bits << " vs "
        << failures[next].row.fail_reason_bits;
    ++next;
  }
  EXPECT_EQ(next, failing) << where << ": CheckBlock reported extra entries";
}

TEST(CheckBlock, NamesTheEntriesCheckEntryFailsWithTheSameRows) {
  int64_t failing_seen = 0, passing_seen = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    CheckBlockFixture fixture(seed);
    for (int count = 1; count <= 16; ++count) {
      std::vector<VerifyEntry> entries;
      for (int i = 0; i < count; ++i) entries.push_back(fixture.RandomEntry());
      for (bool check_token : {false, true}) {
        ExpectSameAsCheckEntry(fixture.launch(), entries, check_token,
                               "seed " + std::to_string(seed), &passing_seen, &failing_seen);
      }
    }
  }
  // Both outcomes occur often, so the comparison covers passing and failing entries alike.
  EXPECT_GT(failing_seen, 1000);
  EXPECT_GT(passing_seen, 1000);
}

// Chains of every block size up to the largest: valid ones pass whole (the screen's shortcut),
// and each corruption fails exactly the entries CheckEntry fails, with its rows.
TEST(CheckBlock, ChainBlocksPassOrNameTheEntriesCheckEntryFails) {
  int64_t failing_seen = 0, passing_seen = 0, clean_blocks = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CheckBlockFixture fixture(seed, kCheckBlockEntries + 16);
    for (int count = 1; count <= kCheckBlockEntries; count += count < 20 ? 1 : 9) {
      std::vector<VerifyEntry> entries = fixture.ValidChain(count);
      const int corruptions = static_cast<int>((seed + count) % 3);
      for (int k = 0; k < corruptions; ++k) fixture.Corrupt(&entries);
      for (bool check_token : {false, true}) {
        const int64_t failing_before = failing_seen;
        ExpectSameAsCheckEntry(fixture.launch(), entries, check_token,
                               "seed " + std::to_string(seed) + " count " + std::to_string(count),
                               &passing_seen, &failing_seen);
        if (corruptions == 0) {
          EXPECT_EQ(failing_seen, failing_before) << "a valid chain failed, seed " << seed;
          ++clean_blocks;
        }
      }
    }
  }
  EXPECT_GT(clean_blocks, 100);
  EXPECT_GT(failing_seen, 200);
  EXPECT_GT(passing_seen, 10000);
}

}  // namespace
}  // namespace kvcanary::testing
