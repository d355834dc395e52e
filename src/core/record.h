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


// A little-endian word at any byte address (slot strides need not be multiples of 8).
KVC_HOST_DEVICE uint64_t LoadLeU64(const uint8_t* bytes) {
  uint64_t value;
  memcpy(&value, bytes, sizeof(value));
  return value;
}

// One 16-byte block as two little-endian words. REQUIRES: bytes 16-byte aligned (real-KV strips
// are: R5, R7 and num_bytes_per_token % 16 == 0), so the GPU issues one 16-byte load.
KVC_HOST_DEVICE void LoadBlock16(const uint8_t* bytes, uint64_t* lo, uint64_t* hi) {
#if defined(__CUDA_ARCH__)
  const ulonglong2 block = *reinterpret_cast<const ulonglong2*>(bytes);
  *lo = block.x;
  *hi = block.y;
#else
  *lo = LoadLeU64(bytes);
  *hi = LoadLeU64(bytes + 8);
#endif
}

// Records live at slot * slot_stride_bytes: 16-byte aligned whenever the stride is a multiple of
// 16 (the runtime allocates 32), where the GPU takes two 16-byte accesses instead of bytes.
KVC_HOST_DEVICE Record LoadRecord(const uint8_t* record_bytes) {
  Record record;
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(record_bytes) & 15) == 0) {
    const ulonglong2 a = reinterpret_cast<const ulonglong2*>(record_bytes)[0];
    const ulonglong2 b = reinterpret_cast<const ulonglong2*>(record_bytes)[1];
    return Record{static_cast<int64_t>(a.x), static_cast<int64_t>(a.y), static_cast<int64_t>(b.x),
                  static_cast<int64_t>(b.y)};
  }
#endif
  memcpy(&record, record_bytes, sizeof(record));
  return record;
}

KVC_HOST_DEVICE void StoreRecord(uint8_t* record_bytes, const Record& record) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(record_bytes) & 15) == 0) {
    auto* out = reinterpret_cast<ulonglong2*>(record_bytes);
    out[0] = ulonglong2{static_cast<unsigned long long>(record.token),
                        static_cast<unsigned long long>(record.position)};
    out[1] = ulonglong2{static_cast<unsigned long long>(record.prev_hash),
                        static_cast<unsigned long long>(record.real_kv_hash)};
    return;
  }
#endif
  memcpy(record_bytes, &record, sizeof(record));
}

// Byte offsets of the record words that a backend may store separately.
inline constexpr int64_t kRecordPrevHashOffset = 16;
inline constexpr int64_t kRecordRealKvHashOffset = 24;

// A little-endian word at any byte address; one 8-byte store on the GPU when the address allows.
KVC_HOST_DEVICE void StoreLeU64(uint8_t* bytes, uint64_t value) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(bytes) & 7) == 0) {
    *reinterpret_cast<uint64_t*>(bytes) = value;
    return;
  }
#endif
  memcpy(bytes, &value, sizeof(value));
}

// The token, position and prev_hash words of a record (all but real_kv_hash).
KVC_HOST_DEVICE void StoreChainWords(uint8_t* record_bytes, int64_t token, int64_t position,
                                     int64_t prev_hash) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(record_bytes) & 15) == 0) {
    *reinterpret_cast<ulonglong2*>(record_bytes) = ulonglong2{
        static_cast<unsigned long long>(token), static_cast<unsigned long long>(position)};
    *reinterpret_cast<uint64_t*>(record_bytes + kRecordPrevHashOffset) =
        static_cast<uint64_t>(prev_hash);
    return;
  }
#endif
  StoreLeU64(record_bytes, static_cast<uint64_t>(token));
  StoreLeU64(record_bytes + 8, static_cast<uint64_t>(position));
  StoreLeU64(record_bytes + kRecordPrevHashOffset, static_cast<uint64_t>(prev_hash));
}

// slot_hash of a stored record: the prev_hash its successor must hold.
KVC_HOST_DEVICE uint64_t RecordHash(const Record& record) {
  return RecordHash(record.token, record.position, record.prev_hash);
}

}  // namespace kvcanary
