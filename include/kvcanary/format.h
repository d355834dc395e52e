// The canary record format: every constant and enumeration (docs/format.md).
//
// This header is the only place these values are written down. Host and device code include it;
// every constant is a plain `inline constexpr` scalar so device code may use it by value (the CUDA
// guide forbids taking the address of a host constexpr in device code, so never pass one by
// reference, e.g. to std::min).
#pragma once

#include <cstdint>

namespace kvcanary {

// Chain anchor. The head hash (what a position-0 record stores) is Splitmix64(kCanaryChainAnchor).
inline constexpr uint64_t kCanaryChainAnchor = 0xC0FFEE1234567890ull;

// req_pool_indices[r] == kReqPoolIdxPadding marks a padding batch row.
inline constexpr int64_t kReqPoolIdxPadding = 0;
// KV slot 0 is the dummy slot of padded tokens; verify never checks it.
inline constexpr int64_t kTokenToKvSlotPadding = 0;

// One record: four little-endian int64 fields [token, position, prev_hash, real_kv_hash].
inline constexpr int kCanaryFieldsPerSlot = 4;
inline constexpr int kCanaryFieldToken = 0;
inline constexpr int kCanaryFieldPosition = 1;
inline constexpr int kCanaryFieldPrevHash = 2;
inline constexpr int kCanaryFieldRealKvHash = 3;
inline constexpr int kCanarySlotBytes = 32;
static_assert(kCanarySlotBytes == kCanaryFieldsPerSlot * 8, "a record is four int64 fields");

// One violation row: eight int64 columns.
inline constexpr int kViolationFields = 8;
inline constexpr int kViolationFieldKernelKind = 0;
inline constexpr int kViolationFieldSlotIdx = 1;
inline constexpr int kViolationFieldPosition = 2;
inline constexpr int kViolationFieldStoredToken = 3;
inline constexpr int kViolationFieldExpectedToken = 4;
inline constexpr int kViolationFieldStoredChainHash = 5;
inline constexpr int kViolationFieldExpectedAux = 6;
inline constexpr int kViolationFieldFailReasonBits = 7;
inline constexpr int kViolationRowBytes = kViolationFields * 8;

// One row of the violation ring, columns in kViolationField* order. The kernels write rows as
// eight int64 words; the runtime and the tools read them back as this struct.
struct ViolationRow {
  int64_t kernel_kind = 0;  // the CanaryLaunchTag of the launch that found it
  int64_t slot_idx = 0;
  int64_t position = 0;
  int64_t stored_token = 0;
  int64_t expected_token = 0;
  int64_t stored_chain_hash = 0;
  int64_t expected_aux = 0;  // expected prev hash (verify) or expected position (write)
  int64_t fail_reason_bits = 0;

  // REQUIRES: `eight` points at kViolationFields int64 values in column order (host only).
  static ViolationRow FromArray(const int64_t* eight) {
    return ViolationRow{eight[kViolationFieldKernelKind],     eight[kViolationFieldSlotIdx],
                        eight[kViolationFieldPosition],       eight[kViolationFieldStoredToken],
                        eight[kViolationFieldExpectedToken],  eight[kViolationFieldStoredChainHash],
                        eight[kViolationFieldExpectedAux],    eight[kViolationFieldFailReasonBits]};
  }
};
static_assert(sizeof(ViolationRow) == kViolationRowBytes, "a row is eight int64 columns");

// Real-KV sources per launch, and the (page_size, num_bytes_per_token, read_bytes) triple.
inline constexpr int kMaxRealKvSources = 4;
// Layers one source may span (RealKvSource::layer_addresses, a kvcanary addition): each is folded
// like a source of its own, so the limit only bounds the work per slot.
inline constexpr int64_t kMaxRealKvLayers = 1024;
inline constexpr int kRealKvSourceFieldsPerEntry = 3;
inline constexpr int kRealKvSourceFieldPageSize = 0;
inline constexpr int kRealKvSourceFieldNumBytesPerToken = 1;
inline constexpr int kRealKvSourceFieldReadBytes = 2;
// Real-KV bytes are folded in 16-byte blocks; PARTIAL mode folds exactly one block per source.
inline constexpr int64_t kRealKvBlockBytes = 16;

// Batch-size limit of PlanOffsets only (kvcanary's deviation D6: the fused Plan has no such limit).
inline constexpr int64_t kPlanBsBlockSize = 4096;
// PlanOffsets requires a scratch of at least kPlanBsBlockSize + 1 entries (O14).
inline constexpr int64_t kPlanOffsetsScratchMinLength = kPlanBsBlockSize + 1;

// splitmix64 multipliers; shifts are 30, 27, 31.
inline constexpr uint64_t kSplitmix64Multiplier1 = 0xBF58476D1CE4E5B9ull;
inline constexpr uint64_t kSplitmix64Multiplier2 = 0x94D049BB133111EBull;

// Device counts (verify_num_valid, write_num_valid_reqs, violation_write_index) are int32, so a
// capacity above this is rejected (V12, W14).
inline constexpr int64_t kMaxDeviceCount = 2147483647;

// Fail reason bits, OR-ed into column 7 of a violation row.
struct FailReason {
  static constexpr int64_t kVerifyChainHashMismatch = int64_t{1} << 0;
  static constexpr int64_t kVerifyPositionMismatch = int64_t{1} << 1;
  static constexpr int64_t kVerifyRealKvHashMismatch = int64_t{1} << 2;
  static constexpr int64_t kWriteTokenMismatch = int64_t{1} << 3;
  static constexpr int64_t kWritePositionMismatch = int64_t{1} << 4;
  static constexpr int64_t kVerifyTokenMismatch = int64_t{1} << 5;
  static constexpr int kNumBits = 6;
};

// Which bytes of the real KV feed the record's fourth field.
enum class RealKvHashMode : int32_t {
  kNone = 0,     // no fingerprint; the field is 0
  kPartial = 1,  // the first 16 bytes of each source's strip
  kAll = 2,      // read_bytes of each source's strip
};

// Stamped into column 0 of every violation row; indexes the per-tag counter arrays.
// One row per group: its HEAD, TAIL and SWEEP launches, K then V.
// clang-format off
enum class CanaryLaunchTag : int64_t {
  kHeadKFull = 0, kHeadVFull = 1, kTailKFull = 2, kTailVFull = 3, kSweepKFull = 4, kSweepVFull = 5,
  kHeadKSwa = 6,  kHeadVSwa = 7,  kTailKSwa = 8,  kTailVSwa = 9,  kSweepKSwa = 10, kSweepVSwa = 11,
};
// clang-format on
inline constexpr int kNumLaunchTags = 12;

// "HEAD_K_FULL" ... "SWEEP_V_SWA", or nullptr for a value outside [0, kNumLaunchTags).
const char* LaunchTagName(int64_t tag);

// The reporter's label of one fail-reason bit ("verify_chain_hash", ...), or nullptr for a bit
// that has no name.
const char* FailReasonLabel(int64_t bit);

}  // namespace kvcanary
