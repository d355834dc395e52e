// The L3 tier of the offload sidecar: a page's records go from the host mirrors into a record
// blob in a PageStore and come back into the host slots; a blob that comes back changed, for
// another key, of another size or stale is reported as corruption (kCorrupt in mode log, raised
// in mode raise), never taken for a miss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
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
using testing::FakeEngineOptions;
using testing::FakeEngine;
using testing::HostPool;

template <typename Body>
std::string ViolationMessage(Body body) {
  return ThrownMessage<ViolationError>(body, "ViolationError");
}

constexpr const char* kAnotherPage =
    "kv-canary: CANARY_L3_LOAD: stored page 'p1' is corrupt: key hash does not match key 'p1' (a "
    "blob of another page)";

// The message of a load that must have found a corrupt page.
std::string CorruptMessage(const StoreLoadResult& result) {
  EXPECT_EQ(result.status, StoreLoadStatus::kCorrupt);
  return result.message;
}

class CanaryStoreTest : public ::testing::Test {
 protected:
  explicit CanaryStoreTest(FakeEngineOptions options = BackupOptions(false))
      : engine_(options), host_(64) {
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
  // The first page stored as "p0", and its blob copied under "p1": a blob of another page.
  void StoreUnderAnotherKey() {
    Backup(first_);
    engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
    store_.Put("p1", *store_.Find("p0"));
  }
  StoreLoadResult Load(PageStore& store, const std::string& key) {
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
  EXPECT_EQ(Load(store_, "p0").status, StoreLoadStatus::kLoaded);
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
  EXPECT_EQ(Load(store, "p0").status, StoreLoadStatus::kLoaded);
  EXPECT_EQ(HostRecords(), RecordsOf(first_));
  std::filesystem::remove_all(directory);
}

TEST_F(CanaryStoreTest, MissingKeyIsAMissAndChangesNothing) {
  Backup(second_);
  const StoreLoadResult miss = Load(store_, "never-stored");
  EXPECT_EQ(miss.status, StoreLoadStatus::kMiss);
  EXPECT_EQ(miss.message, "");
  EXPECT_EQ(engine_.canary->Metrics().l3_corrupt_loads, 0);
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

TEST_F(CanaryStoreTest, FlippedByteIsCorruptionAndChangesNothing) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  Backup(second_);
  (*store_.Find("p0"))[100] ^= 0x01;
  EXPECT_EQ(CorruptMessage(Load(store_, "p0")),
            "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: checksum mismatch (the blob "
            "changed after it was stored)");
  EXPECT_TRUE(engine_.log.Contains("ERROR CANARY_L3_LOAD CORRUPT [FULL]: key=p0: checksum"));
  EXPECT_EQ(engine_.canary->Metrics().l3_corrupt_loads, 1);
  EXPECT_NE(engine_.canary->PrometheusText().find("kvcanary_l3_corrupt_loads_total 1\n"),
            std::string::npos);
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

TEST_F(CanaryStoreTest, BlobOfAnotherPageIsCorruption) {
  StoreUnderAnotherKey();
  EXPECT_EQ(CorruptMessage(Load(store_, "p1")), kAnotherPage);
}

TEST_F(CanaryStoreTest, BlobOfAnotherSizeIsCorruption) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  store_.Find("p0")->resize(100);
  EXPECT_EQ(CorruptMessage(Load(store_, "p0")),
            "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: blob bytes must be 288, got "
            "100");
  store_.Find("p0")->resize(288);
  EXPECT_EQ(
      CorruptMessage(engine_.canary->LoadFromStore(GroupKind::kFull, {11, 2, 3}, store_, "p0")),
      "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: blob bytes must be 416, got "
      "288");
}

TEST_F(CanaryStoreTest, ArgumentsAreCheckedBeforeTheStoreIsRead) {
  EXPECT_EQ(
      ErrorMessage([&] { engine_.canary->OffloadToStore(GroupKind::kFull, {64}, store_, "p0"); }),
      "kv-canary: offload to store host index must be in [0, 64), got 64");
  EXPECT_EQ(
      ErrorMessage([&] { engine_.canary->LoadFromStore(GroupKind::kFull, {}, store_, "p0"); }),
      "kv-canary: load from store host_indices must name at least one slot, got none");
  EXPECT_THROW(engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "../p0"), Error);
  EXPECT_EQ(store_.size(), 0u);
}

FakeEngineOptions WithConfig(Mode mode, OnViolation on_violation, bool verify_backup = false) {
  FakeEngineOptions options = BackupOptions(verify_backup);
  options.config.mode = mode;
  options.config.on_violation = on_violation;
  return options;
}

class VerifiedStoreTest : public CanaryStoreTest {
 protected:
  explicit VerifiedStoreTest(Mode mode = Mode::kLog)
      : CanaryStoreTest(WithConfig(mode, OnViolation::kLog, /*verify_backup=*/true)) {}
  // Stores the first page under "p0", then a newer version of it, and makes the store answer
  // with the older blob.
  void StoreStalePage() {
    Backup(first_);
    engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
    const std::vector<uint8_t> stale = *store_.Find("p0");
    Backup(second_);
    engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
    ASSERT_EQ(Load(store_, "p0").status, StoreLoadStatus::kLoaded);
    *store_.Find("p0") = stale;
  }
};

TEST_F(VerifiedStoreTest, StaleBlobFailsVerificationAgainstTheHostKv) {
  StoreStalePage();
  EXPECT_EQ(CorruptMessage(Load(store_, "p0")),
            "kv-canary: CANARY_VERIFY_BACKUP: 4 hash mismatch(es) across 2 backed-up slots");
  EXPECT_TRUE(engine_.log.Contains("ERROR CANARY_VERIFY_BACKUP MISMATCH [FULL]: k_tail slot=11"));
  EXPECT_TRUE(
      engine_.log.Contains("ERROR CANARY_L3_LOAD CORRUPT [FULL]: key=p0: "
                           "CANARY_VERIFY_BACKUP: 4 hash mismatch(es)"));
  EXPECT_EQ(engine_.canary->Metrics().l3_corrupt_loads, 1);
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

class RaisingVerifiedStoreTest : public VerifiedStoreTest {
 protected:
  RaisingVerifiedStoreTest() : VerifiedStoreTest(Mode::kRaise) {}
};

TEST_F(RaisingVerifiedStoreTest, StaleBlobRaisesAndChangesNothing) {
  StoreStalePage();
  EXPECT_EQ(ViolationMessage([&] { Load(store_, "p0"); }),
            "kv-canary: CANARY_VERIFY_BACKUP: 4 hash mismatch(es) across 2 backed-up slots");
  EXPECT_EQ(engine_.canary->Metrics().l3_corrupt_loads, 1);
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

class RaisingStoreTest : public CanaryStoreTest {
 protected:
  RaisingStoreTest() : CanaryStoreTest(WithConfig(Mode::kLog, OnViolation::kRaise)) {}
};

TEST_F(RaisingStoreTest, CorruptBlobRaisesWithOnViolationRaise) {
  Backup(first_);
  engine_.canary->OffloadToStore(GroupKind::kFull, kHost, store_, "p0");
  Backup(second_);
  (*store_.Find("p0"))[100] ^= 0x01;
  EXPECT_EQ(ViolationMessage([&] { Load(store_, "p0"); }),
            "kv-canary: CANARY_L3_LOAD: stored page 'p0' is corrupt: checksum mismatch (the blob "
            "changed after it was stored)");
  EXPECT_TRUE(engine_.log.Contains("ERROR CANARY_L3_LOAD CORRUPT [FULL]: key=p0: checksum"));
  EXPECT_EQ(engine_.canary->Metrics().l3_corrupt_loads, 1);
  EXPECT_EQ(HostRecords(), RecordsOf(second_));
}

// Quarantine reports a corrupt page by its status: no forward read it, so no request is named.
class QuarantineStoreTest : public CanaryStoreTest {
 protected:
  QuarantineStoreTest() : CanaryStoreTest(Options()) {}
  static FakeEngineOptions Options() {
    FakeEngineOptions options = WithConfig(Mode::kLog, OnViolation::kQuarantine);
    options.config.incident_file = IncidentPath();
    return options;
  }
  static std::string IncidentPath() {
    return (std::filesystem::temp_directory_path() /
            ("kvc_store_incidents_" + std::to_string(::getpid()) + ".jsonl"))
        .string();
  }
  ~QuarantineStoreTest() override { std::filesystem::remove(IncidentPath()); }
};

TEST_F(QuarantineStoreTest, CorruptBlobIsAStatusAnIncidentAndNamesNoRequest) {
  StoreUnderAnotherKey();
  EXPECT_EQ(CorruptMessage(Load(store_, "p1")), kAnotherPage);
  EXPECT_TRUE(engine_.canary->TakeAffectedRequests().empty());
  std::ifstream incidents(IncidentPath());
  std::string line;
  ASSERT_TRUE(std::getline(incidents, line));
  EXPECT_EQ(line,
            "{\"step\":2,\"launch_tag\":\"CANARY_L3_LOAD\",\"group\":\"FULL\",\"key\":"
            "\"p1\",\"reason\":\"key hash does not match key 'p1' (a blob of another page)\"}");
  EXPECT_FALSE(std::getline(incidents, line));
  engine_.Step();  // the engine keeps serving
  EXPECT_EQ(engine_.canary->Metrics().rows_reported, 0);
}

}  // namespace
}  // namespace kvcanary::runtime
