// Simulator sizes past int64. `--bytes-per-token 1152921504606846976` (2^60) made the pool size
// num_slots x 2^60 wrap to 0: empty buffers that the first token write ran past (a segfault).
// The pool, the req_to_token table and the engine now refuse such sizes with a kv-canary error
// before allocating, and leave no buffer behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "kvcanary/error.h"
#include "kvcanary/runtime/device_memory.h"
#include "sim/engine.h"
#include "sim/kv_pool.h"
#include "sim/req_to_token_table.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

constexpr int64_t k2To60 = int64_t{1} << 60;

// Runs `body`, which must throw kvcanary::Error, and checks that it left no buffer allocated.
template <typename Body>
std::string RefusalOf(Body body) {
  const int64_t live_before = runtime::LiveBufferCount();
  std::string message;
  try {
    body();
    ADD_FAILURE() << "no kvcanary::Error thrown";
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_EQ(runtime::LiveBufferCount(), live_before) << "a refused construction kept buffers";
  return message;
}

TEST(SimLimits, KvPoolBytesPastInt64AreRefusedNotWrapped) {
  EXPECT_EQ(RefusalOf([] { KvPool(Device::CPU(), 16384, 4, k2To60, nullptr); }),
            "kv-canary: KvPool num_slots x bytes_per_token overflows: 16384 * "
            "1152921504606846976");
}

TEST(SimLimits, KvPoolSlotBytesPastInt64AreRefused) {
  // One row fits (2 x 2^61 bytes of pool would not be allocated anyway), but a slot of 2 x 4 layers
  // of it does not: SlotBytes() must never wrap.
  EXPECT_EQ(RefusalOf([] { KvPool(Device::CPU(), 2, 4, int64_t{1} << 61, nullptr); }),
            "kv-canary: KvPool slot bytes (2 x num_layers x bytes_per_token) overflows: "
            "2 * 4 * 2305843009213693952");
}

TEST(SimLimits, ReqToTokenTableSizesPastInt64AreRefused) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(RefusalOf([&] { ReqToTokenTable(Device::CPU(), max, 8, nullptr); }),
            "kv-canary: req_to_token rows (max_running_reqs + 1) overflows: "
            "9223372036854775807 + 1");
  EXPECT_EQ(RefusalOf([] { ReqToTokenTable(Device::CPU(), int64_t{1} << 31, int64_t{1} << 32,
                                           nullptr); }),
            "kv-canary: req_to_token entries (rows x row pitch) overflows: 2147483649 * "
            "4294967296");
}

TEST(SimLimits, EngineWithAHugeBytesPerTokenThrowsInsteadOfCrashing) {
  SimOptions options;
  options.bytes_per_token = k2To60;
  EXPECT_EQ(RefusalOf([&] { Engine(options, "limits", nullptr); }),
            "kv-canary: KvPool num_slots x bytes_per_token overflows: 16384 * "
            "1152921504606846976");
}

TEST(SimLimits, ALayerCountPastIntIsRefusedNotTruncated) {
  SimOptions options;
  options.num_layers = (int64_t{1} << 32) + 1;  // truncated, this was 1 layer
  EXPECT_EQ(RefusalOf([&] { Engine(options, "limits", nullptr); }),
            "kv-canary: num_layers must be in [-2147483648, 2147483647], got 4294967297");
}

}  // namespace
}  // namespace kvcanary::sim
