// The reporter's frozen text: one violation row rendered as the lines log
// tooling parses. Byte-identical to SGLang's reporter; pure functions of the row.
#pragma once

#include <cstdint>
#include <string>

#include "kvcanary/format.h"

namespace kvcanary::runtime {

// One row of the violation ring: the format's own type (kvcanary/format.h).
using kvcanary::ViolationRow;

// "0x" + 16 lower-case hex digits of the value as unsigned 64-bit.
std::string FormatHex64(int64_t value);

// "HEAD_K_FULL" ..., or "unknown(<tag>)".
std::string LaunchTagLabel(int64_t tag);

// The reporter's canary kind: "sweep_k_full" for SWEEP tags, "per_forward_head_k_full" for the
// others, "unknown(<tag>)" outside the 12 tags.
std::string CanaryKindName(int64_t tag);

// Labels of the set bits in ascending bit order joined by `separator`; bits without a label are
// skipped; "none" when no bit has a label.
std::string FailReasonLabels(int64_t fail_reason_bits, const char* separator);

// The row's bits include write_token or write_position (the row came from a write).
bool IsWriteRow(const ViolationRow& row);
// The row's bits include write_token or verify_token (an expected token was compared).
bool HasTokenCheck(const ViolationRow& row);

// The zero-init pattern of a never-written slot: stored token, position and chain hash all 0
// (a real write always stores a non-zero chain value).
bool IsUntouchedRow(const ViolationRow& row);

// "kv_canary violation: launch_tag=... expected_aux=0x<16hex>" — the line tooling parses.
std::string FormatViolationFirstLine(const ViolationRow& row);

// The whole message of one row: the first line, then the detection block ending with the
// "total_violations=... ring_overflow=True|False step_when_pumped=..." footer. Lines joined by
// '\n', no trailing newline.
std::string FormatViolation(const ViolationRow& row, int64_t total_violations, bool ring_overflow,
                            int64_t step_when_pumped);

// The WARNING for `dropped` untouched rows in one reporter call.
std::string FormatDroppedRowsWarning(int64_t dropped);

}  // namespace kvcanary::runtime
