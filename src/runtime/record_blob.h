// The record blob: a page's canary records as the L3 tier stores them. A 32-byte header
// (little-endian, as the hosts kvcanary runs on):
//   0  magic "KVCL"          u32      12 bytes per record (32)       u32
//   4  version (1)           u16      16 BLAKE2b-64 of the store key u64
//   6  record buffers (2|4)  u16      24 checksum                    u64
//   8  slots of the page     u32
// then, buffer by buffer (the group's allocated buffers in index order), one record per slot in
// the order of the host indices. The checksum is BLAKE2b-64 of the whole blob with its own field
// zeroed. The key hash catches a blob returned for another key; the checksum any changed byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvcanary::runtime {

inline constexpr uint32_t kRecordBlobMagic = 0x4C43564Bu;  // "KVCL"
inline constexpr uint16_t kRecordBlobVersion = 1;
inline constexpr int64_t kRecordBlobHeaderBytes = 32;
// The shapes a blob can describe: a group's four canary buffers at most, a u32 slot count.
inline constexpr int kMaxRecordBlobBuffers = 4;
inline constexpr int64_t kMaxRecordBlobSlots = 0xFFFFFFFF;

// Header and payload bytes of a blob of `buffers` record buffers of `slots` slots.
int64_t RecordBlobBytes(int buffers, int64_t slots);

// The blob of `payload` (buffers * slots records) stored under `key`.
std::vector<uint8_t> EncodeRecordBlob(const std::string& key, int buffers, int64_t slots,
                                      const std::vector<uint8_t>& payload);

// Empty when `blob` is a well-formed blob of `buffers` x `slots` records written for `key`
// (then it is exactly EncodeRecordBlob's bytes for them, RecordBlobBytes long); otherwise what is
// wrong with it, naming the field, the expected and the found value. A shape outside
// [1, kMaxRecordBlobBuffers] x [1, kMaxRecordBlobSlots] is refused before the blob is read.
std::string CheckRecordBlob(const std::vector<uint8_t>& blob, const std::string& key, int buffers,
                            int64_t slots);

}  // namespace kvcanary::runtime
