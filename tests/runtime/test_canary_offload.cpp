// verify_backup: after a backup the runtime re-hashes each backed-up host
// slot from the engine's host copy of layer 0 and compares it with the mirrored TAIL record.
#include <gtest/gtest.h>

#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/host_pool.h"

namespace kvcanary::runtime {
namespace {

using testing::BackupOptions;
using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::HostPool;
using testing::kBytesPerToken;

std::string Hex16(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::uppercase << std::hex << std::setw(16) << std::setfill('0') << value;
  return out.str();
}

// Runs `body`, requires it to throw ViolationError, and returns the message.
template <typename Body>
std::string ViolationMessage(Body body) {
  return ThrownMessage<ViolationError>(body, "ViolationError");
}

class VerifyBackupTest : public ::testing::Test {
 protected:
  VerifyBackupTest() : engine_(BackupOptions(true)), host_(64) {
    engine_.AddRequest(6);
    for (int i = 0; i < 2; ++i) engine_.Step();
    host_.CopyFrom(engine_, 11, 3);
    host_.CopyFrom(engine_, 2, 4);
  }

  // Field 3 (the real-KV hash) of the device TAIL record of `slot`.
  uint64_t TailHash(bool v_half, int64_t slot) const {
    const TensorView tail = engine_.canary->CanaryBuffer(GroupKind::kFull, true, v_half);
    uint64_t value = 0;
    std::memcpy(&value, tail.data_as<uint8_t>() + 32 * slot + 8 * kCanaryFieldRealKvHash, 8);
    return value;
  }
  uint64_t HostHash(const TensorView& layer0, int64_t slot) const {
    const RealKvSource source = MakeRealKvSource(layer0, 1, kBytesPerToken, 16);
    return RealKvHash(&source, 1, static_cast<int32_t>(RealKvHashMode::kPartial), slot);
  }

  FakeEngine engine_;
  HostPool host_;
};

TEST_F(VerifyBackupTest, FaithfulHostCopyPasses) {
  ASSERT_NE(TailHash(false, 3), 0u) << "the TAIL record must carry a fingerprint";
  EXPECT_NO_THROW(engine_.canary->BackupRecords(GroupKind::kFull, {11, 2}, {3, 4}, host_.Layer0()));
  EXPECT_FALSE(engine_.log.Contains("ERROR"));
}

TEST_F(VerifyBackupTest, CorruptedHostKByteIsReportedWithTheStoredAndComputedHashes) {
  host_.K(11)[5] ^= 0x40;  // inside the 16 bytes PARTIAL folds
  const uint64_t computed = HostHash(host_.Layer0().k, 11);
  ASSERT_NE(computed, TailHash(false, 3));
  EXPECT_EQ(ViolationMessage([&] {
              engine_.canary->BackupRecords(GroupKind::kFull, {11, 2}, {3, 4}, host_.Layer0());
            }),
            "kv-canary: CANARY_VERIFY_BACKUP: 1 hash mismatch(es) across 2 backed-up slots");
  EXPECT_TRUE(
      engine_.log.Contains("ERROR CANARY_VERIFY_BACKUP MISMATCH [FULL]: k_tail slot=11 "
                           "stored=" +
                           Hex16(TailHash(false, 3)) + " computed=" + Hex16(computed)));
  EXPECT_FALSE(engine_.log.Contains("v_tail"));
}

TEST_F(VerifyBackupTest, KAndVMismatchesAreCountedTogether) {
  host_.K(11)[0] ^= 0xFF;
  host_.V(2)[15] ^= 0x01;
  EXPECT_EQ(ViolationMessage([&] {
              engine_.canary->BackupRecords(GroupKind::kFull, {11, 2}, {3, 4}, host_.Layer0());
            }),
            "kv-canary: CANARY_VERIFY_BACKUP: 2 hash mismatch(es) across 2 backed-up slots");
  EXPECT_TRUE(engine_.log.Contains("MISMATCH [FULL]: k_tail slot=11 "));
  EXPECT_TRUE(
      engine_.log.Contains("MISMATCH [FULL]: v_tail slot=2 stored=" + Hex16(TailHash(true, 4))));
}

TEST_F(VerifyBackupTest, BytesPastThePartialFoldAreNotChecked) {
  host_.K(11)[16] ^= 0xFF;  // PARTIAL fingerprints the first 16 bytes only
  EXPECT_NO_THROW(engine_.canary->BackupRecords(GroupKind::kFull, {11}, {3}, host_.Layer0()));
}

TEST_F(VerifyBackupTest, SlotOutsideTheHostCopyWarnsAndIsSkipped) {
  DeviceBuffer small_k(Device::CPU(), 8 * kBytesPerToken),
      small_v(Device::CPU(), 8 * kBytesPerToken);
  const HostLayer0 small{small_k.View(DType::kUInt8, {8, kBytesPerToken}),
                         small_v.View(DType::kUInt8, {8, kBytesPerToken})};
  // Slot 11 lies past the 8-slot copy; slot 2 holds zeros and mismatches.
  EXPECT_EQ(ViolationMessage([&] {
              engine_.canary->BackupRecords(GroupKind::kFull, {11, 2}, {3, 4}, small);
            }),
            "kv-canary: CANARY_VERIFY_BACKUP: 2 hash mismatch(es) across 2 backed-up slots");
  EXPECT_TRUE(engine_.log.Contains(
      "WARNING CANARY_VERIFY_BACKUP [FULL]: k_tail slot=11 is outside the host layer-0 copy (8 "
      "slots); skipped"));
  EXPECT_FALSE(engine_.log.Contains("slot=11 stored="));
}

TEST_F(VerifyBackupTest, MissingHostCopyIsRefusedBeforeAnyCopy) {
  HostLayer0 k_only = host_.Layer0();
  k_only.v = TensorView();
  try {
    engine_.canary->BackupRecords(GroupKind::kFull, {11}, {3}, k_only);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "kv-canary: verify_backup needs host_layer0.v (the host copy of layer 0) in "
              "BackupRecords for group FULL");
  }
  // Nothing was mirrored: restoring host slot 11 brings back the zero record.
  engine_.canary->RestoreRecords(GroupKind::kFull, {11}, {5});
  const TensorView tail = engine_.canary->CanaryBuffer(GroupKind::kFull, true, false);
  EXPECT_EQ(
      std::vector<uint8_t>(tail.data_as<uint8_t>() + 5 * 32, tail.data_as<uint8_t>() + 6 * 32),
      std::vector<uint8_t>(32, 0));
}

TEST(VerifyBackup, OffByDefaultIgnoresTheHostCopy) {
  FakeEngine engine(BackupOptions(false));
  HostPool host(64);
  engine.AddRequest(6);
  for (int i = 0; i < 2; ++i) engine.Step();
  host.CopyFrom(engine, 11, 3);
  host.K(11)[0] ^= 0xFF;
  EXPECT_NO_THROW(engine.canary->BackupRecords(GroupKind::kFull, {11}, {3}, host.Layer0()));
  EXPECT_NO_THROW(engine.canary->BackupRecords(GroupKind::kFull, {11}, {3}));
  EXPECT_FALSE(engine.log.Contains("CANARY_VERIFY_BACKUP"));
}

}  // namespace
}  // namespace kvcanary::runtime
