// The checked arithmetic of kvcanary/checked.h: exact results inside int64, and the one message
// naming the quantity and its operands at the first step past it.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "kvcanary/checked.h"
#include "runtime/error_message.h"

namespace kvcanary {
namespace {

using runtime::ErrorMessage;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(Checked, TryMulAndTryAddReportOverflowAsNullopt) {
  EXPECT_EQ(TryMul(6, 7), 42);
  EXPECT_EQ(TryMul(-3, 5), -15);
  EXPECT_EQ(TryMul(kMax, 1), kMax);
  EXPECT_FALSE(TryMul(kMax, 2).has_value());
  EXPECT_FALSE(TryMul(kMin, -1).has_value());
  EXPECT_FALSE(TryMul(int64_t{1} << 32, int64_t{1} << 31).has_value());
  EXPECT_EQ(TryAdd(kMax - 1, 1), kMax);
  EXPECT_FALSE(TryAdd(kMax, 1).has_value());
  EXPECT_FALSE(TryAdd(kMin, -1).has_value());
}

TEST(Checked, SaturatingAddClampsToTheInt64Range) {
  EXPECT_EQ(SaturatingAdd(5, 1), 6);
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax - 1, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMin, -1), kMin);
  EXPECT_EQ(SaturatingAdd(kMin, 0), kMin);
  EXPECT_EQ(SaturatingAdd(kMax, kMin), -1);
}

TEST(Checked, CheckedMulReturnsTheProductOfEveryFactor) {
  EXPECT_EQ(CheckedMul("bytes", 3, 4), 12);
  EXPECT_EQ(CheckedMul("bytes", 3, 4, 5), 60);
  EXPECT_EQ(CheckedMul("bytes", int64_t{1} << 40, 1 << 20), int64_t{1} << 60);
}

TEST(Checked, CheckedMulNamesTheQuantityAndEveryFactor) {
  EXPECT_EQ(ErrorMessage([] { CheckedMul("ring bytes", kMax, 2); }),
            "kv-canary: ring bytes overflows: 9223372036854775807 * 2");
  // The overflow is caught at the step that leaves int64, and the message still lists all three.
  EXPECT_EQ(ErrorMessage([] { CheckedMul("table bytes", int64_t{1} << 31, int64_t{1} << 31, 4); }),
            "kv-canary: table bytes overflows: 2147483648 * 2147483648 * 4");
}

TEST(Checked, CheckedAddNamesTheQuantityAndEveryTerm) {
  EXPECT_EQ(CheckedAdd("end", 1, 2, 3), 6);
  EXPECT_EQ(ErrorMessage([] { CheckedAdd("rounded size", kMax, 255); }),
            "kv-canary: rounded size overflows: 9223372036854775807 + 255");
}

TEST(Checked, CheckInRangeIsInclusiveAndNamesTheRange) {
  EXPECT_NO_THROW(CheckInRange<int64_t>("x", 1, 1, 4));
  EXPECT_NO_THROW(CheckInRange<int64_t>("x", 4, 1, 4));
  EXPECT_EQ(ErrorMessage([] { CheckInRange<int64_t>("KVCANARY_RING_CAPACITY", 0, 1, 4); }),
            "kv-canary: KVCANARY_RING_CAPACITY must be in [1, 4], got 0");
  EXPECT_EQ(ErrorMessage([] { CheckInRange<int64_t>("x", 5, 1, 4); }),
            "kv-canary: x must be in [1, 4], got 5");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ErrorMessage([&] { CheckInRange("p", nan, 0.0, 1.0); }),
            "kv-canary: p must be in [0, 1], got nan");
}

TEST(Checked, CheckedNarrowKeepsValuesThatFitAndRefusesTheRest) {
  EXPECT_EQ(CheckedNarrow<int32_t>("n", 2147483647), 2147483647);
  EXPECT_EQ(CheckedNarrow<int32_t>("n", -2147483648LL), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ErrorMessage([] { CheckedNarrow<int32_t>("num_layers", int64_t{1} << 31); }),
            "kv-canary: num_layers must be in [-2147483648, 2147483647], got 2147483648");
}

}  // namespace
}  // namespace kvcanary
