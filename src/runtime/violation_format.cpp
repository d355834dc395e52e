#include "kvcanary/runtime/violation_format.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <string_view>

#include "kvcanary/format.h"
#include "kvcanary/runtime/health.h"

namespace kvcanary::runtime {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string FormatHex64(int64_t value) {
  char buffer[19];
  std::snprintf(buffer, sizeof(buffer), "0x%016" PRIx64, static_cast<uint64_t>(value));
  return buffer;
}


std::string LaunchTagLabel(int64_t tag) {
  const char* name = LaunchTagName(tag);
  return name != nullptr ? std::string(name) : "unknown(" + std::to_string(tag) + ")";
}

std::string CanaryKindName(int64_t tag) {
  const char* name = LaunchTagName(tag);
  if (name == nullptr) return "unknown(" + std::to_string(tag) + ")";
  return IsSweepTag(static_cast<int>(tag)) ? Lower(name) : "per_forward_" + Lower(name);
}

std::string FailReasonLabels(int64_t fail_reason_bits, const char* separator) {
  std::string labels;
  for (int i = 0; i < FailReason::kNumBits; ++i) {
    const int64_t bit = int64_t{1} << i;
    if ((fail_reason_bits & bit) == 0) continue;
    const char* label = FailReasonLabel(bit);
    if (label == nullptr) continue;
    if (!labels.empty()) labels += separator;
    labels += label;
  }
  return labels.empty() ? "none" : labels;
}

bool IsWriteRow(const ViolationRow& row) {
  return (row.fail_reason_bits &
          (FailReason::kWriteTokenMismatch | FailReason::kWritePositionMismatch)) != 0;
}

bool HasTokenCheck(const ViolationRow& row) {
  return (row.fail_reason_bits &
          (FailReason::kWriteTokenMismatch | FailReason::kVerifyTokenMismatch)) != 0;
}

bool IsUntouchedRow(const ViolationRow& row) {
  return row.stored_token == 0 && row.position == 0 && row.stored_chain_hash == 0;
}

std::string FormatViolationFirstLine(const ViolationRow& row) {
  return "kv_canary violation: launch_tag=" + LaunchTagLabel(row.kernel_kind) +
         " fail_reason=" + FailReasonLabels(row.fail_reason_bits, "+") +
         " slot_idx=" + std::to_string(row.slot_idx) +
         " position=" + std::to_string(row.position) +
         " stored_token=" + std::to_string(row.stored_token) +
         " expected_token=" + std::to_string(row.expected_token) +
         " stored_chain_hash=" + FormatHex64(row.stored_chain_hash) +
         " expected_aux=" + FormatHex64(row.expected_aux);
}

std::string FormatViolation(const ViolationRow& row, int64_t total_violations, bool ring_overflow,
                            int64_t step_when_pumped) {
  const std::string tag = LaunchTagLabel(row.kernel_kind);
  const bool write_row = IsWriteRow(row);
  std::string text = FormatViolationFirstLine(row);
  text += "\nKV cache canary violation detected (kernel_kind=" + tag +
          ", slot_idx=" + std::to_string(row.slot_idx) +
          ", position=" + std::to_string(row.position) + ")";
  text += "\ncanary_kind:       " + CanaryKindName(row.kernel_kind);
  text += "\n  fail_reasons: " + FailReasonLabels(row.fail_reason_bits, " ");
  // The frozen spacing (three spaces before "position=") is SGLang's; tooling depends on it.
  text += std::string(write_row ? "\n  actual:   " : "\n  stored:   ") +
          "token_id=" + std::to_string(row.stored_token) +
          "   position=" + std::to_string(row.position) +
          " prev_hash=" + FormatHex64(row.stored_chain_hash);
  if (write_row) {
    // A write row's aux column is the expected position, printed as a plain integer.
    text += "\n  expected: token_id=" + std::to_string(row.expected_token) +
            "   position=" + std::to_string(row.expected_aux);
  } else if (HasTokenCheck(row)) {
    text += "\n  expected: token_id=" + std::to_string(row.expected_token) +
            " prev_hash=" + FormatHex64(row.expected_aux);
  } else {
    text += "\n  expected: prev_hash=" + FormatHex64(row.expected_aux);
  }
  text += "\n  total_violations=" + std::to_string(total_violations) +
          " ring_overflow=" + (ring_overflow ? "True" : "False") +
          " step_when_pumped=" + std::to_string(step_when_pumped);
  return text;
}

std::string FormatDroppedRowsWarning(int64_t dropped) {
  return "kv-canary: dropped " + std::to_string(dropped) +
         " violation rows of never-written canary slots (stored token, position and chain hash "
         "all 0)";
}

}  // namespace kvcanary::runtime
