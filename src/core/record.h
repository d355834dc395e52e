// Loading and storing 32-byte canary records and 8-column violation rows. Shared by the CPU loops
// and the CUDA kernels. Byte order is little-endian: the host and the GPU are.
#pragma once

#include <cstdint>
#include <cstring>

#include "kvcanary/format.h"
#include "kvcanary/hash.h"

namespace kvcanary {

struct Record {
  int64_t token = 0;
  int64_t position = 0;
  int64_t prev_hash = 0;
  int64_t real_kv_hash = 0;
};

// One violation row, in VIOLATION_FIELD_* order.
struct ViolationRow {
  int64_t kernel_kind = 0;
  int64_t slot = 0;
  int64_t position = 0;
  int64_t stored_token = 0;
  int64_t expected_token = 0;
  int64_t stored_chain_hash = 0;
  int64_t expected_aux = 0;
  int64_t fail_reason_bits = 0;
};
static_assert(sizeof(ViolationRow) == kViolationRowBytes, "a row is eight int64 columns");

// A little-endian word at any byte address (slot strides need not be multiples of 8).
KVC_HOST_DEVICE uint64_t LoadLeU64(const uint8_t* bytes) {
  uint64_t value;
  memcpy(&value, bytes, sizeof(value));
  return value;
}

KVC_HOST_DEVICE Record LoadRecord(const uint8_t* record_bytes) {
  Record record;
  memcpy(&record, record_bytes, sizeof(record));
  return record;
}

KVC_HOST_DEVICE void StoreRecord(uint8_t* record_bytes, const Record& record) {
  memcpy(record_bytes, &record, sizeof(record));
}

// slot_hash of a stored record: the prev_hash its successor must hold.
KVC_HOST_DEVICE uint64_t RecordHash(const Record& record) {
  return RecordHash(record.token, record.position, record.prev_hash);
}

}  // namespace kvcanary
