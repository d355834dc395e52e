// Install sizes past int64. Each used to wrap into a small (or zero) allocation that the runtime
// then wrote past: the violation ring (capacity x 64 bytes), a group's records (slots x 32), its
// host mirrors, and the expected-token pool (rows x width x 4). Each is now refused with the
// quantity named, and a refused install frees what it had allocated: the count of live buffers is
// the same before and after, and no install line is logged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/install_case.h"

namespace kvcanary::runtime {
namespace {

TEST(InstallLimits, AValidCaseInstallsAndHoldsBuffersUntilDestroyed) {
  for (const Device device : Devices()) {
    InstallCase c(device);
    const int64_t live_before = LiveBufferCount();
    {
      auto canary = CanaryManager::Install(c.config, c.args);
      ASSERT_NE(canary, nullptr);
      EXPECT_GT(LiveBufferCount(), live_before);
    }
    EXPECT_EQ(LiveBufferCount(), live_before);
  }
}

TEST(InstallLimits, RingCapacityPastItsLimitIsRefused) {
  for (const Device device : Devices()) {
    InstallCase c(device);
    c.config.ring_capacity = int64_t{1} << 58;  // x 64 bytes = 2^64: wrapped to an empty ring
    EXPECT_EQ(c.Refusal(),
              "kv-canary: ring_capacity must be in [1, 16777216], got 288230376151711744");
  }
}

// The device records come first; a host mirror refused after them must free them again.
TEST(InstallLimits, GroupRecordAndHostMirrorBytesPastInt64AreRefused) {
  for (const Device device : Devices()) {
    for (int64_t GroupSpec::*slots : {&GroupSpec::num_slots, &GroupSpec::host_slots}) {
      InstallCase c(device);
      c.args.groups[0].*slots = int64_t{1} << 59;  // x 32 bytes = 2^64
      const std::string name = slots == &GroupSpec::num_slots ? "num_slots" : "host_slots";
      EXPECT_EQ(c.Refusal(), "kv-canary: group FULL " + name +
                                 " x 32 record bytes overflows: 576460752303423488 * 32");
    }
  }
}

TEST(InstallLimits, ExpectedTokenPoolBytesPastInt64AreRefusedAfterTheRing) {
  for (const Device device : Devices()) {
    InstallCase c(device);
    c.config.enable_verify_token_assert = true;
    // 2^30 rows x 2^32 columns x 4 bytes = 2^64: wrapped to an empty pool.
    c.args.req_to_token =
        TensorView(c.table.data(), DType::kInt32, device, {int64_t{1} << 30, int64_t{1} << 32});
    EXPECT_EQ(c.Refusal(),
              "kv-canary: expected token pool bytes (req_to_token rows x width x 4) overflows: "
              "1073741824 * 4294967296 * 4");
  }
}

// Given capacities are the counts every plan is allocated with: past an op's count (or below 1)
// they are refused, field by field, before the install allocates anything.
TEST(InstallLimits, GivenCapacitiesOutsideAnOpsCountAreRefused) {
  struct Bad {
    int64_t Capacities::*field;
    const char* name;
  };
  for (const Device device : Devices()) {
    for (const Bad bad : {Bad{&Capacities::verify_capacity, "verify_capacity"},
                          Bad{&Capacities::write_req_capacity, "write_req_capacity"},
                          Bad{&Capacities::write_entry_capacity, "write_entry_capacity"}}) {
      for (const int64_t value : {int64_t{0}, int64_t{-1}, int64_t{2147483648}}) {
        InstallCase c(device);
        c.args.capacities = Capacities{64, 8, 64};
        c.args.capacities.value().*bad.field = value;
        EXPECT_EQ(c.Refusal(), std::string("kv-canary: capacities.") + bad.name +
                                   " must be in [1, 2147483647], got " + std::to_string(value));
      }
    }
  }
}

// Resident memory of this process, in bytes (Linux).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  int64_t resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A large host buffer is mapped zeroed, not allocated and then written: a workspace sized for the
// largest forward costs memory only where steps touch it, and one the machine cannot map is an
// error, never a memset that gets the engine's process killed for memory.
TEST(InstallLimits, LargeHostBuffersReadZeroWithoutBeingTouched) {
  const int64_t resident_before = ResidentBytes();
  const int64_t live_before = LiveBufferCount();
  {
    const int64_t bytes = int64_t{4} << 30;
    std::optional<DeviceBuffer> buffer;
    try {
      buffer.emplace(Device::CPU(), bytes);
    } catch (const Error& error) {
      GTEST_SKIP() << "this machine maps no 4 GiB: " << error.what();
    }
    EXPECT_LT(ResidentBytes() - resident_before, int64_t{64} << 20);
    const auto* data = static_cast<const uint8_t*>(buffer->data());
    for (const int64_t at : {int64_t{0}, bytes / 2, bytes - 1}) EXPECT_EQ(data[at], 0) << at;
    static_cast<uint8_t*>(buffer->data())[bytes - 1] = 7;  // writable
  }
  EXPECT_EQ(LiveBufferCount(), live_before);
  EXPECT_EQ(ErrorMessage([] { DeviceBuffer(Device::CPU(), int64_t{1} << 62); }),
            "kv-canary: out of host memory allocating 4611686018427387904 bytes");
  EXPECT_EQ(LiveBufferCount(), live_before);
}

TEST(InstallLimits, DeviceBufferSizeRoundedPastInt64IsRefused) {
  const int64_t live_before = LiveBufferCount();
  EXPECT_EQ(ErrorMessage([] { DeviceBuffer(Device::CPU(), INT64_MAX); }),
            "kv-canary: buffer size rounded to 256 bytes overflows: 9223372036854775807 + 255");
  EXPECT_EQ(LiveBufferCount(), live_before);
}

TEST(InstallLimits, BufferViewPastInt64IsRefused) {
  const DeviceBuffer buffer(Device::CPU(), 64);
  EXPECT_EQ(ErrorMessage([&] { buffer.View(DType::kInt64, {int64_t{1} << 61}); }),
            "kv-canary: buffer view bytes overflows: 8 * 2305843009213693952");
  EXPECT_EQ(ErrorMessage([&] { buffer.View(DType::kUInt8, {8}, INT64_MAX); }),
            "kv-canary: buffer view end overflows: 9223372036854775807 + 8");
}

}  // namespace
}  // namespace kvcanary::runtime
