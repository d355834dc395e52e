// The L3 tier of the offload sidecar: a page's records go from the host mirrors into a record
// blob in a PageStore and come back into the host slots; a blob that comes back changed, for
// another key, of another size or stale is raised as corruption, never taken for a miss.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/page_store.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/host_pool.h"

namespace kvcanary::runtime {
namespace {

using testing::BackupOptions;
using testing::FakeEngine;
using testing::HostPool;

template <typename Body>
std::string ViolationMessage(Body body) {
  return ThrownMessage<ViolationError>(body, "ViolationError");
}

class CanaryStoreTest : public ::testing::Test {
 protected:
  explicit CanaryStoreTest(bool verify_backup = false)
      : engine_(BackupOptions(verify_backup)), host_(64) {
    const int64_t row = engine_.AddRequest(6);
    for (int i = 0; i < 2; ++i) engine_.Step();
    for (int64_t pos = 0; pos < 4; ++pos) {
      (pos < 2 ? first_ : second_).push_back(engine_.SlotOf(row, pos));
    }
  }

  // The four records (head/tail, K/V) of a device slot, concatenated.
  std::vector<uint8_t> DeviceRecords(int64_t slot) const {
    std::vector<uint8_t> records;
    for (bool tail : {false, true}) {
      for (bool v_half : {false, true}) {
        const uint8_t* base =
            engine_.canary->CanaryBuffer(GroupKind::kFull, tail, v_half).data_as<uint8_t>();
        records.insert(records.end(), base + 32 * slot, base + 32 * (slot + 1));
      }
    }
    return records;
  }
  // Backs the device slots up into host slots {11, 2}, KV (host pool) and records alike.
  void Backup(const std::vector<int64_t>& device) {
    host_.CopyFrom(engine_, 11, device[0]);
    host_.CopyFrom(engine_, 2, device[1]);
    engine_.canary->BackupRecords(GroupKind::kFull, kHost, device, host_.Layer0());
  }
  // The records host slots {11, 2} now hold, read through a restore into device slots 40, 41.
  std::vector<uint8_t> HostRecords() {
    engine_.canary->RestoreRecords(GroupKind::kFull, kHost, {40, 41});
    std::vector<uint8_t> records = DeviceRecords(40);
    const std::vector<uint8_t> second = DeviceRecords(41);
    records.insert(records.end(), second.begin(), second.end());
    return records;
  }
  std::vector<uint8_t> RecordsOf(const std::vector<int64_t>& device) const {
    std::vector<uint8_t> records = DeviceRecords(device[0]);
    const std::vector<uint8_t> second = DeviceRecords(device[1]);
    records.insert(records.end(), second.begin(), second.end());
    return records;
  }
  bool Load(PageStore& store, const std::string& key) {
    return engine_.canary->LoadFromStore(GroupKind::kFull, kHost, store, key, host_.Layer0());
  }

  const std::vector<int64_t> kHost = {11, 2};
  FakeEngine engine_;
  HostPool host_;
  std::vector<int64_t> first_, second_;  // device slots of positions 0-1 and 2-3
  MemoryPageStore store_;
};

TEST_F(CanaryStoreTest, RecordsComeBackFromTheStoreIntoTheHostSlots) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  Backup(second_);  // the host slots now hold another page
  ASSERT_NE(HostRecords(), RecordsOf(first_));
  EXPECT_TRUE(Load(store_, "p0"));
  EXPECT_EQ(HostRecords(), RecordsOf(first_));
  EXPECT_FALSE(engine_.log.Contains("ERROR"));
}

TEST_F(CanaryStoreTest, FileStoreRoundTrip) {
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("kvc_canary_store_" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  FilePageStore store(directory.string());
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store, "p0");
  EXPECT_EQ(std::filesystem::file_size(store.PathOf("p0")), 32u + 4 * 2 * 32);
  Backup(second_);
  EXPECT_TRUE(Load(store, "p0"));
  EXPECT_EQ(HostRecords(), RecordsOf(first_));
  std::filesystem::remove_all(directory);
}

TEST_F(CanaryStoreTest, MissingKeyIsAMissAndChangesNothing) {
  Backup(second_);
  EXPECT_FALSE(Load(store_, "never-stored"));
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

TEST_F(CanaryStoreTest, FlippedByteIsCorruptionAndChangesNothing) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  Backup(second_);
  (*store_.Find("p0"))[100] ^= 0x01;
  EXPECT_EQ(ViolationMessage([&] { Load(store_, "p0"); }),
            "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: checksum mismatch (the blob "
            "changed after it was stored)");
  EXPECT_TRUE(engine_.log.Contains("ERROR CANARY_L3_LOAD CORRUPT [FULL]: key=p0: checksum"));
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

TEST_F(CanaryStoreTest, BlobOfAnotherPageIsCorruption) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  store_.Put("p1", *store_.Find("p0"));
  EXPECT_EQ(ViolationMessage([&] { Load(store_, "p1"); }),
            "kv-canary: CANARY_L3_LOAD: stored page 'p1' is corrupt: key hash does not match key "
            "'p1' (a blob of another page)");
}

TEST_F(CanaryStoreTest, BlobOfAnotherSizeIsCorruption) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  store_.Find("p0")->resize(100);
  EXPECT_EQ(ViolationMessage([&] { Load(store_, "p0"); }),
            "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: blob bytes must be 288, got "
            "100");
  store_.Find("p0")->resize(288);
  EXPECT_EQ(ViolationMessage([&] {
              engine_.canary->LoadFromStore(GroupKind::kFull, {11, 2, 3}, store_, "p0");
            }),
            "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: blob bytes must be 416, got "
            "288");
}

TEST_F(CanaryStoreTest, ArgumentsAreCheckedBeforeTheStoreIsRead) {
  EXPECT_EQ(ErrorMessage([&] {
              engine_.canary->OffloadToStore(GroupKind::kFull, {64}, store_, "p0");
            }),
            "kv-canary: offload to store host index must be in [0, 64), got 64");
  EXPECT_EQ(ErrorMessage([&] { engine_.canary->LoadFromStore(GroupKind::kFull, {}, store_, "p0"); }),
            "kv-canary: load from store host_indices must name at least one slot, got none");
  EXPECT_THROW(engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "../p0"), Error);
  EXPECT_EQ(store_.size(), 0u);
}

class VerifiedStoreTest : public CanaryStoreTest {
 protected:
  VerifiedStoreTest() : CanaryStoreTest(/*verify_backup=*/true) {}
};

TEST_F(VerifiedStoreTest, StaleBlobFailsVerificationAgainstTheHostKv) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  const std::vector<uint8_t> stale = *store_.Find("p0");
  Backup(second_);  // a newer version of the page, stored under the same key
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  EXPECT_TRUE(Load(store_, "p0"));
  *store_.Find("p0") = stale;  // the store answers with the older blob
  EXPECT_EQ(ViolationMessage([&] { Load(store_, "p0"); }),
            "kv-canary: CANARY_VERIFY_BACKUP: 4 hash mismatch(es) across 2 backed-up slots");
  EXPECT_TRUE(engine_.log.Contains("ERROR CANARY_VERIFY_BACKUP MISMATCH [FULL]: k_tail slot=11"));
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

}  // namespace
}  // namespace kvcanary::runtime
