// Record blob encoding and its checks (record_blob.h has the layout).
#include "runtime/record_blob.h"

#include <cstring>
#include <sstream>
#include <string>

#include "kvcanary/format.h"
#include "runtime/blake2b.h"

namespace kvcanary::runtime {
namespace {

constexpr size_t kChecksumOffset = 24;

uint64_t Digest64(const void* data, size_t size) {
  const std::vector<uint8_t> digest = Blake2b(data, size, 8);
  uint64_t value = 0;
  std::memcpy(&value, digest.data(), 8);
  return value;
}

// The checksum of `blob` as if its checksum field held zero.
uint64_t BlobChecksum(std::vector<uint8_t> blob) {
  std::memset(blob.data() + kChecksumOffset, 0, 8);
  return Digest64(blob.data(), blob.size());
}

template <typename T>
T ReadField(const std::vector<uint8_t>& blob, size_t offset) {
  T value{};
  std::memcpy(&value, blob.data() + offset, sizeof(T));
  return value;
}

template <typename T>
void WriteField(std::vector<uint8_t>& blob, size_t offset, T value) {
  std::memcpy(blob.data() + offset, &value, sizeof(T));
}

template <typename T>
std::string Mismatch(const char* field, T expected, T found) {
  std::ostringstream out;
  out << field << " must be " << expected << ", got " << found;
  return out.str();
}

}  // namespace

int64_t RecordBlobBytes(int buffers, int64_t slots) {
  return kRecordBlobHeaderBytes + int64_t{buffers} * slots * kCanarySlotBytes;
}

std::vector<uint8_t> EncodeRecordBlob(const std::string& key, int buffers, int64_t slots,
                                      const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> blob(kRecordBlobHeaderBytes);
  WriteField<uint32_t>(blob, 0, kRecordBlobMagic);
  WriteField<uint16_t>(blob, 4, kRecordBlobVersion);
  WriteField<uint16_t>(blob, 6, static_cast<uint16_t>(buffers));
  WriteField<uint32_t>(blob, 8, static_cast<uint32_t>(slots));
  WriteField<uint32_t>(blob, 12, static_cast<uint32_t>(kCanarySlotBytes));
  WriteField<uint64_t>(blob, 16, Digest64(key.data(), key.size()));
  blob.insert(blob.end(), payload.begin(), payload.end());
  WriteField<uint64_t>(blob, kChecksumOffset, BlobChecksum(blob));
  return blob;
}

std::string CheckRecordBlob(const std::vector<uint8_t>& blob, const std::string& key, int buffers,
                            int64_t slots) {
  // A shape the header cannot hold would size the blob wrongly (or overflow): refused before
  // anything is read, so no size can send a read past the blob's bytes.
  if (buffers < 1 || buffers > kMaxRecordBlobBuffers) {
    return "record buffers must be in [1, " + std::to_string(kMaxRecordBlobBuffers) + "], got " +
           std::to_string(buffers);
  }
  if (slots < 1 || slots > kMaxRecordBlobSlots) {
    return "slots must be in [1, " + std::to_string(kMaxRecordBlobSlots) + "], got " +
           std::to_string(slots);
  }
  const int64_t expected_bytes = RecordBlobBytes(buffers, slots);
  if (static_cast<int64_t>(blob.size()) != expected_bytes) {
    return Mismatch<int64_t>("blob bytes", expected_bytes, static_cast<int64_t>(blob.size()));
  }
  if (ReadField<uint32_t>(blob, 0) != kRecordBlobMagic) {
    std::ostringstream out;
    out << std::hex << std::uppercase << "magic must be 0x" << kRecordBlobMagic << ", got 0x"
        << ReadField<uint32_t>(blob, 0);
    return out.str();
  }
  if (ReadField<uint16_t>(blob, 4) != kRecordBlobVersion) {
    return Mismatch<uint32_t>("version", kRecordBlobVersion, ReadField<uint16_t>(blob, 4));
  }
  if (ReadField<uint16_t>(blob, 6) != buffers) {
    return Mismatch<int64_t>("record buffers", buffers, ReadField<uint16_t>(blob, 6));
  }
  if (ReadField<uint32_t>(blob, 8) != slots) {
    return Mismatch<int64_t>("slots", slots, ReadField<uint32_t>(blob, 8));
  }
  if (ReadField<uint32_t>(blob, 12) != kCanarySlotBytes) {
    return Mismatch<int64_t>("record bytes", kCanarySlotBytes, ReadField<uint32_t>(blob, 12));
  }
  if (ReadField<uint64_t>(blob, 16) != Digest64(key.data(), key.size())) {
    return "key hash does not match key '" + key + "' (a blob of another page)";
  }
  if (ReadField<uint64_t>(blob, kChecksumOffset) != BlobChecksum(blob)) {
    return "checksum mismatch (the blob changed after it was stored)";
  }
  return "";
}

}  // namespace kvcanary::runtime
