// The CPU verify checks entries a block at a time with the hashes computed in lanes (CheckBlock);
// CheckEntry, one entry at a time, is the formula both backends share. On random blocks that mix
// every case (skipped slots, head, unreachable and in-pool predecessors, corrupted words, strips
// past their source's rows, paged and layered sources, several fold lengths) the two must name
// the same failing entries with the same rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/record.h"
#include "core/verify_math.h"
#include "cpu/check_block.h"

namespace kvcanary::testing {
namespace {

using cpu::BlockFailure;
using cpu::CheckBlock;
using cpu::kCheckBlockEntries;

constexpr int64_t kSlots = 96;
constexpr int64_t kStride = 48;  // records need not be packed

class CheckBlockFixture {
 public:
  explicit CheckBlockFixture(uint64_t seed) : rng_(seed), canary_(kSlots * kStride) {
    for (int64_t slot = 0; slot < kSlots; ++slot) WriteRecord(slot);
    launch_.canary = canary_.data();
    launch_.num_slots = kSlots;
    launch_.slot_stride_bytes = kStride;
    launch_.kernel_kind = 7;
    AddSources();
  }

  // A random entry: slots and predecessors both in and out of the pool, positions and tokens that
  // mostly match the stored record.
  VerifyEntry RandomEntry() {
    VerifyEntry entry;
    entry.slot = Pick(-2, kSlots + 2);
    const int kind = static_cast<int>(Pick(0, 3));
    entry.prev_slot = kind == 0 ? -1 : kind == 1 ? 0 : Pick(-3, kSlots + 3);
    const Record stored = StoredAt(entry.slot);
    entry.position = Pick(0, 9) == 0 ? stored.position + 1 : stored.position;
    entry.expected_token = Pick(0, 4) == 0 ? -1 : Pick(0, 9) == 0 ? stored.token ^ 1 : stored.token;
    return entry;
  }

  const LaunchParams& launch() const { return launch_; }

 private:
  int64_t Pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  Record StoredAt(int64_t slot) const {
    if (slot <= 0 || slot >= kSlots) return Record{};
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
      source.rows = (kSlots - 20) / source.page_size;
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
    for (int64_t slot = 1; slot < kSlots; ++slot) {
      if (Pick(0, 2) == 0) continue;
      Record record = StoredAt(slot);
      record.real_kv_hash = ToSigned(RealKvFingerprint(launch_.real_kv, slot));
      if (Pick(0, 2) == 0) record.prev_hash = ToSigned(RecordHash(StoredAt(Pick(1, kSlots - 1))));
      std::memcpy(canary_.data() + slot * kStride, &record, sizeof(record));
    }
  }

  std::mt19937_64 rng_;
  std::vector<uint8_t> canary_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<int64_t> layer_addresses_[kMaxRealKvSources];
  LaunchParams launch_;
};

TEST(CheckBlock, NamesTheEntriesCheckEntryFailsWithTheSameRows) {
  int64_t failing_seen = 0, passing_seen = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    CheckBlockFixture fixture(seed);
    for (int count = 1; count <= kCheckBlockEntries; ++count) {
      std::vector<VerifyEntry> entries;
      for (int i = 0; i < count; ++i) entries.push_back(fixture.RandomEntry());
      for (bool check_token : {false, true}) {
        BlockFailure failures[kCheckBlockEntries];
        const int failing =
            CheckBlock(fixture.launch(), check_token, entries.data(), count, failures);
        int next = 0;
        for (int i = 0; i < count; ++i) {
          ViolationRow expected;
          if (CheckEntry(fixture.launch(), check_token, entries[i], &expected) == 0) {
            ++passing_seen;
            continue;
          }
          ++failing_seen;
          ASSERT_LT(next, failing) << "seed " << seed << " entry " << i << " not reported";
          EXPECT_EQ(failures[next].index, i) << "seed " << seed;
          EXPECT_EQ(std::memcmp(&failures[next].row, &expected, sizeof(expected)), 0)
              << "seed " << seed << " entry " << i << " bits " << expected.fail_reason_bits
              << " vs " << failures[next].row.fail_reason_bits;
          ++next;
        }
        EXPECT_EQ(next, failing) << "seed " << seed << ": CheckBlock reported extra entries";
      }
    }
  }
  // Both outcomes occur often, so the comparison covers passing and failing entries alike.
  EXPECT_GT(failing_seen, 1000);
  EXPECT_GT(passing_seen, 1000);
}

}  // namespace
}  // namespace kvcanary::testing
