// The record blob: every header field, the key hash and the checksum are checked, and each
// failure names what it found.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/record_blob.h"

namespace kvcanary::runtime {
namespace {

std::vector<uint8_t> Payload(int buffers, int64_t slots) {
  std::vector<uint8_t> payload(static_cast<size_t>(buffers * slots * 32));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  return payload;
}

class RecordBlobTest : public ::testing::Test {
 protected:
  std::vector<uint8_t> blob_ = EncodeRecordBlob("page-3", 4, 2, Payload(4, 2));

  template <typename T>
  void Set(size_t offset, T value) {
    std::memcpy(blob_.data() + offset, &value, sizeof(T));
  }
  std::string Check() const { return CheckRecordBlob(blob_, "page-3", 4, 2); }
  // The check of a fresh blob with the header field at `offset` set to `value`.
  template <typename T>
  std::string CheckWith(size_t offset, T value) {
    blob_ = EncodeRecordBlob("page-3", 4, 2, Payload(4, 2));
    Set<T>(offset, value);
    return Check();
  }
};

TEST_F(RecordBlobTest, EncodedBlobPassesAndCarriesThePayload) {
  EXPECT_EQ(blob_.size(), static_cast<size_t>(RecordBlobBytes(4, 2)));
  EXPECT_EQ(RecordBlobBytes(4, 2), 32 + 4 * 2 * 32);
  EXPECT_EQ(Check(), "");
  EXPECT_EQ(std::vector<uint8_t>(blob_.begin() + kRecordBlobHeaderBytes, blob_.end()),
            Payload(4, 2));
}

TEST_F(RecordBlobTest, EachHeaderFieldIsChecked) {
  EXPECT_EQ(CheckWith<uint32_t>(0, 0x12345678u), "magic must be 0x4C43564B, got 0x12345678");
  EXPECT_EQ(CheckWith<uint16_t>(4, 2), "version must be 1, got 2");
  EXPECT_EQ(CheckWith<uint16_t>(6, 2), "record buffers must be 4, got 2");
  EXPECT_EQ(CheckWith<uint32_t>(8, 3), "slots must be 2, got 3");
  EXPECT_EQ(CheckWith<uint32_t>(12, 64), "record bytes must be 32, got 64");
}

TEST_F(RecordBlobTest, ShapeAndSizeMustMatchTheLoad) {
  EXPECT_EQ(CheckRecordBlob(blob_, "page-3", 2, 4), "record buffers must be 2, got 4");
  EXPECT_EQ(CheckRecordBlob(blob_, "page-3", 4, 3), "blob bytes must be 416, got 288");
  blob_.pop_back();
  EXPECT_EQ(Check(), "blob bytes must be 288, got 287");
}

TEST_F(RecordBlobTest, ShapeOutsideTheHeaderIsRefusedBeforeAnyRead) {
  // -1 buffers x 1 slot would size the blob at 0 bytes: an empty blob must not be read.
  EXPECT_EQ(CheckRecordBlob({}, "page-3", -1, 1), "record buffers must be in [1, 4], got -1");
  EXPECT_EQ(CheckRecordBlob(blob_, "page-3", 5, 2), "record buffers must be in [1, 4], got 5");
  EXPECT_EQ(CheckRecordBlob(blob_, "page-3", 4, 0), "slots must be in [1, 4294967295], got 0");
  EXPECT_EQ(CheckRecordBlob(blob_, "page-3", 4, int64_t{1} << 61),
            "slots must be in [1, 4294967295], got 2305843009213693952");
}

TEST_F(RecordBlobTest, BlobOfAnotherKeyIsRefused) {
  EXPECT_EQ(CheckRecordBlob(blob_, "page-4", 4, 2),
            "key hash does not match key 'page-4' (a blob of another page)");
}

TEST_F(RecordBlobTest, AnyFlippedByteFailsTheChecksum) {
  for (size_t i : {size_t{16}, size_t{24}, size_t{31}, size_t{32}, blob_.size() - 1}) {
    std::vector<uint8_t> flipped = blob_;
    flipped[i] ^= 0x10;
    const std::string problem = CheckRecordBlob(flipped, "page-3", 4, 2);
    EXPECT_FALSE(problem.empty()) << "byte " << i;
    if (i >= 24) {
      EXPECT_EQ(problem, "checksum mismatch (the blob changed after it was stored)") << i;
    }
  }
}

}  // namespace
}  // namespace kvcanary::runtime
