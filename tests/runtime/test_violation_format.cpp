#include "kvcanary/runtime/violation_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvcanary/format.h"
#include "text_lines.h"

namespace kvcanary::runtime {
namespace {

using testing::Lines;

ViolationRow Row(std::vector<int64_t> values) {
  EXPECT_EQ(values.size(), static_cast<size_t>(kViolationFields));
  return ViolationRow::FromArray(values.data());
}

// SGLang's reporter vector 1: a HEAD verify row without a token check.
TEST(ViolationFormat, VerifyRowBlockIsByteExact) {
  const ViolationRow row =
      Row({0, 17, 42, 111, -1, 0x1111111111111111, 0x2222222222222222, 7});
  EXPECT_EQ(FormatViolation(row, /*total_violations=*/1, /*ring_overflow=*/false, /*step=*/7),
            "kv_canary violation: launch_tag=HEAD_K_FULL "
            "fail_reason=verify_chain_hash+verify_position+verify_real_kv_hash slot_idx=17 "
            "position=42 stored_token=111 expected_token=-1 stored_chain_hash=0x1111111111111111 "
            "expected_aux=0x2222222222222222\n"
            "KV cache canary violation detected (kernel_kind=HEAD_K_FULL, slot_idx=17, "
            "position=42)\n"
            "canary_kind:       per_forward_head_k_full\n"
            "  fail_reasons: verify_chain_hash verify_position verify_real_kv_hash\n"
            "  stored:   token_id=111   position=42 prev_hash=0x1111111111111111\n"
            "  expected: prev_hash=0x2222222222222222\n"
            "  total_violations=1 ring_overflow=False step_when_pumped=7");
}

// Reporter vector 2: a TAIL write row; aux is the expected position in decimal.
TEST(ViolationFormat, WriteRowBlockIsByteExact) {
  const ViolationRow row = Row({2, 5, 43, 999, 888, 0x3333333333333333, 43, 8});
  EXPECT_EQ(FormatViolation(row, 1, false, 3),
            "kv_canary violation: launch_tag=TAIL_K_FULL fail_reason=write_token slot_idx=5 "
            "position=43 stored_token=999 expected_token=888 "
            "stored_chain_hash=0x3333333333333333 expected_aux=0x000000000000002b\n"
            "KV cache canary violation detected (kernel_kind=TAIL_K_FULL, slot_idx=5, "
            "position=43)\n"
            "canary_kind:       per_forward_tail_k_full\n"
            "  fail_reasons: write_token\n"
            "  actual:   token_id=999   position=43 prev_hash=0x3333333333333333\n"
            "  expected: token_id=888   position=43\n"
            "  total_violations=1 ring_overflow=False step_when_pumped=3");
}

// Further rows: a SWEEP verify row with a token check (negative hashes print unsigned).
TEST(ViolationFormat, SweepTokenCheckRow) {
  const ViolationRow row =
      Row({10, 4, 3, 44, 45, -775092142951646884, -775092142951646884, 32});
  const std::vector<std::string> lines = Lines(FormatViolation(row, 2, false, 8));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0],
            "kv_canary violation: launch_tag=SWEEP_K_SWA fail_reason=verify_token slot_idx=4 "
            "position=3 stored_token=44 expected_token=45 stored_chain_hash=0xf53e51cd772bb95c "
            "expected_aux=0xf53e51cd772bb95c");
  EXPECT_EQ(lines[1],
            "KV cache canary violation detected (kernel_kind=SWEEP_K_SWA, slot_idx=4, position=3)");
  EXPECT_EQ(lines[2], "canary_kind:       sweep_k_swa");
  EXPECT_EQ(lines[3], "  fail_reasons: verify_token");
  EXPECT_EQ(lines[4], "  stored:   token_id=44   position=3 prev_hash=0xf53e51cd772bb95c");
  EXPECT_EQ(lines[5], "  expected: token_id=45 prev_hash=0xf53e51cd772bb95c");
  EXPECT_EQ(lines[6], "  total_violations=2 ring_overflow=False step_when_pumped=8");
}

// Further rows: a write_position row; the expected position is the aux column.
TEST(ViolationFormat, WritePositionRow) {
  const ViolationRow row = Row({8, 53504, 512, 1299, 1299, -1, 8448, 16});
  EXPECT_EQ(FormatViolationFirstLine(row),
            "kv_canary violation: launch_tag=TAIL_K_SWA fail_reason=write_position "
            "slot_idx=53504 position=512 stored_token=1299 expected_token=1299 "
            "stored_chain_hash=0xffffffffffffffff expected_aux=0x0000000000002100");
  const std::vector<std::string> lines = Lines(FormatViolation(row, 1, false, 0));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[2], "canary_kind:       per_forward_tail_k_swa");
  EXPECT_EQ(lines[4], "  actual:   token_id=1299   position=512 prev_hash=0xffffffffffffffff");
  EXPECT_EQ(lines[5], "  expected: token_id=1299   position=8448");
}

// Further rows: an unknown tag and a row without fail bits.
TEST(ViolationFormat, UnknownTagAndNoReasons) {
  const ViolationRow row = Row({9999, 1, 2, 3, 4, 5, 6, 0});
  const std::vector<std::string> lines = Lines(FormatViolation(row, 1, false, 0));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0].rfind("kv_canary violation: launch_tag=unknown(9999) fail_reason=none ", 0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1],
            "KV cache canary violation detected (kernel_kind=unknown(9999), slot_idx=1, "
            "position=2)");
  EXPECT_EQ(lines[2], "canary_kind:       unknown(9999)");
  EXPECT_EQ(lines[3], "  fail_reasons: none");
  EXPECT_EQ(lines[5], "  expected: prev_hash=0x0000000000000006");
  EXPECT_EQ(CanaryKindName(-1), "unknown(-1)");
}

TEST(ViolationFormat, OverflowFooter) {
  const ViolationRow row = Row({4, 1, 2, 3, 4, 5, 6, 1});
  const std::vector<std::string> lines = Lines(FormatViolation(row, 5, true, 12));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[2], "canary_kind:       sweep_k_full");
  EXPECT_EQ(lines[6], "  total_violations=5 ring_overflow=True step_when_pumped=12");
}

TEST(ViolationFormat, UnknownBitsHaveNoLabel) {
  EXPECT_EQ(FailReasonLabels(1 | 64 | 128, "+"), "verify_chain_hash");
  EXPECT_EQ(FailReasonLabels(64, " "), "none");
  EXPECT_EQ(FailReasonLabels(32 | 8, "+"), "write_token+verify_token");
}

TEST(ViolationFormat, RowClassification) {
  EXPECT_TRUE(IsWriteRow(Row({2, 0, 0, 0, 0, 0, 0, 8})));
  EXPECT_TRUE(IsWriteRow(Row({2, 0, 0, 0, 0, 0, 0, 16})));
  EXPECT_FALSE(IsWriteRow(Row({2, 0, 0, 0, 0, 0, 0, 32})));
  EXPECT_TRUE(HasTokenCheck(Row({2, 0, 0, 0, 0, 0, 0, 32})));
  EXPECT_FALSE(HasTokenCheck(Row({2, 0, 0, 0, 0, 0, 0, 16})));
}

TEST(ViolationFormat, UntouchedRowIsTokenPositionAndChainZero) {
  EXPECT_TRUE(IsUntouchedRow(Row({0, 17, 0, 0, 5, 0, 0x1234, 3})));
  EXPECT_FALSE(IsUntouchedRow(Row({0, 17, 0, 1, 5, 0, 0x1234, 3})));
  EXPECT_FALSE(IsUntouchedRow(Row({0, 17, 1, 0, 5, 0, 0x1234, 3})));
  EXPECT_FALSE(IsUntouchedRow(Row({0, 17, 0, 0, 5, 9, 0x1234, 3})));
}

TEST(ViolationFormat, FromArrayReadsColumnsInOrder) {
  const int64_t values[kViolationFields] = {1, 2, 3, 4, 5, 6, 7, 8};
  const ViolationRow row = ViolationRow::FromArray(values);
  EXPECT_EQ(row.kernel_kind, 1);
  EXPECT_EQ(row.slot_idx, 2);
  EXPECT_EQ(row.position, 3);
  EXPECT_EQ(row.stored_token, 4);
  EXPECT_EQ(row.expected_token, 5);
  EXPECT_EQ(row.stored_chain_hash, 6);
  EXPECT_EQ(row.expected_aux, 7);
  EXPECT_EQ(row.fail_reason_bits, 8);
}

TEST(ViolationFormat, DroppedRowsWarning) {
  EXPECT_EQ(FormatDroppedRowsWarning(3),
            "kv-canary: dropped 3 violation rows of never-written canary slots (stored token, "
            "position and chain hash all 0)");
}

}  // namespace
}  // namespace kvcanary::runtime
