// RealKvSource sizes past int64: a wrapped page_size x num_bytes_per_token (or a wrapped row
// width) used to pass the width check as a small number, after which every fingerprint read ran
// past its row. The checks now refuse the source with the quantity and its factors named, and a
// source whose byte span does not fit in int64 before any of them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kvcanary/context.h"
#include "kvcanary/error.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::HostTensor;

std::string MessageOf(const TensorView& tensor, int64_t page_size, int64_t num_bytes_per_token) {
  try {
    MakeRealKvSource(tensor, page_size, num_bytes_per_token, 16);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "MakeRealKvSource accepted page_size=" << page_size
                << " num_bytes_per_token=" << num_bytes_per_token;
  return "";
}

TEST(RealKvSourceLimits, PageBytesPastInt64AreRefusedNotWrapped) {
  HostTensor<uint8_t> kv({8, 64});
  // 2^60 x 16 = 2^64 wraps to 0, which the 64-byte row would have "held".
  EXPECT_EQ(MessageOf(kv.view(), int64_t{1} << 60, 16),
            "kv-canary: RealKvSource page_size x num_bytes_per_token overflows: "
            "1152921504606846976 * 16");
  // A wrap to a small positive product: 2^59 + 1 pages of 32 bytes.
  EXPECT_EQ(MessageOf(kv.view(), (int64_t{1} << 59) + 1, 32),
            "kv-canary: RealKvSource page_size x num_bytes_per_token overflows: "
            "576460752303423489 * 32");
}

TEST(RealKvSourceLimits, RowWidthPastInt64IsRefused) {
  // A view whose dim-1 is 2^62 int64 elements, rows 16 bytes apart, all of them one element
  // (inner stride 0): its span, 8 bytes, passes the bounds check, its row width does not (never
  // read: the check fails first). With inner stride 1 the span check refuses it first.
  alignas(16) static int64_t storage[2];
  const TensorView huge(storage, DType::kInt64, Device::CPU(), {1, int64_t{1} << 62}, {2, 0});
  EXPECT_EQ(MessageOf(huge, 1, 16),
            "kv-canary: RealKvSource.tensor dim-1 bytes overflows: 4611686018427387904 * 8");
}

TEST(RealKvSourceLimits, ASpanPastInt64IsRefusedFirst) {
  alignas(16) static int64_t storage[2];
  const TensorView huge(storage, DType::kInt64, Device::CPU(), {1, int64_t{1} << 62}, {2, 1});
  EXPECT_EQ(MessageOf(huge, 1, 16),
            "kv-canary: RealKvSource.tensor must span at most 2^63 - 1 bytes, got shape (1, "
            "4611686018427387904) strides (2, 1)");
}

TEST(RealKvSourceLimits, TheLargestLayoutThatFitsIsStillAccepted) {
  HostTensor<uint8_t> kv({8, 64});
  EXPECT_NO_THROW(MakeRealKvSource(kv.view(), 4, 16, 16));
  EXPECT_NE(MessageOf(kv.view(), 5, 16).find("too narrow"), std::string::npos);
}

}  // namespace
}  // namespace kvcanary
