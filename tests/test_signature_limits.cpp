// The ops' table engine at the int64 limits: a view may legally span almost 2^63 bytes (a row view
// of a wide table, a large pool), so the overlap check's span ends, an address plus up to
// 2^63 - 1 bytes, pass the int64 range. Before the check computed them in 128 bits that sum
// overflowed (undefined; in practice it wrapped negative and an output inside the huge span was
// let through). This binary also runs under UBSan (the asan preset), which reports any overflow.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kvcanary/error.h"
#include "ops/signature.h"

namespace kvcanary::testing {
namespace {

// An int32 row view of two rows whose second row starts almost 2^63 bytes after the first: its
// span, 2^63 - 16 bytes, fits in int64 (the bounds check accepts it); its start plus its span does
// not (any address above 16). Validation reads no element, so the view may claim more memory than
// the buffer holds.
TensorView AlmostMaximalRowView(int32_t* data) {
  const int64_t row_stride = (INT64_MAX - 16) / 4;
  return TensorView(data, DType::kInt32, Device::CPU(), {2, 1}, {row_stride, 1});
}

std::string PlacementError(const TensorView& table, const TensorView& out) {
  sig::TensorSpec table_spec = sig::In(table, "req_to_token", DType::kInt32, 2);
  table_spec.layout = sig::Layout::kRowView;
  const sig::SpecList specs = {table_spec, sig::Out(out, "out", DType::kInt64, 1)};
  try {
    sig::CheckBounds(specs);
    sig::CheckPlacement(out, "out", specs);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(SignatureLimits, AnOutputInsideAnAlmostMaximalSpanOverlapsIt) {
  alignas(8) static int32_t buffer[64] = {};
  const TensorView table = AlmostMaximalRowView(buffer);
  const TensorView inside(buffer + 16, DType::kInt64, Device::CPU(), {4});
  EXPECT_EQ(PlacementError(table, inside),
            "kv-canary: out overlaps req_to_token in memory; an output needs memory of its own");
}

TEST(SignatureLimits, AnOutputBelowAnAlmostMaximalSpanDoesNot) {
  alignas(8) static int32_t buffer[64] = {};
  const TensorView table = AlmostMaximalRowView(buffer + 32);
  const TensorView below(buffer, DType::kInt64, Device::CPU(), {4});
  EXPECT_EQ(PlacementError(table, below), "");
}

TEST(SignatureLimits, ASpanPastInt64IsRefusedBeforeAnyOverlapIsComputed) {
  alignas(8) static int32_t buffer[64] = {};
  const TensorView table(buffer, DType::kInt32, Device::CPU(), {2, 1}, {INT64_MAX / 2, 1});
  const TensorView out(buffer + 16, DType::kInt64, Device::CPU(), {4});
  EXPECT_EQ(PlacementError(table, out),
            "kv-canary: req_to_token must span at most 2^63 - 1 bytes, got shape (2, 1) strides "
            "(4611686018427387903, 1)");
}

}  // namespace
}  // namespace kvcanary::testing
