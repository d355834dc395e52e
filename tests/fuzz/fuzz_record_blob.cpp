// The L3 tier's reads (docs/fuzzing.md): a record blob checked by CheckRecordBlob, and a page file
// of FilePageStore read back by Get, as LoadFromStore reads them. Any bytes, as a blob or as the
// file on disk, must be refused with a reason, or accepted as exactly the bytes EncodeRecordBlob
// writes for the expected key and shape; a file read returns exactly the expected bytes or throws
// a kv-canary error, and never allocates more than the bytes expected.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvcanary/runtime/page_store.h"
#include "runtime/record_blob.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace {

using kvcanary::runtime::CheckRecordBlob;
using kvcanary::runtime::EncodeRecordBlob;
using kvcanary::runtime::FilePageStore;
using kvcanary::runtime::PageSizeError;
using kvcanary::runtime::RecordBlobBytes;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

// The shape and key a load expects: the simulator's (4 buffers, a few slots, its key form) most of
// the time, now and then any value.
struct Expected {
  int buffers = 4;
  int64_t slots = 1;
  std::string key = "n16-k0";
};

Expected ConsumeExpected(FuzzedDataProvider& in) {
  Expected expected;
  const uint8_t shape = in.ConsumeIntegral<uint8_t>();
  expected.buffers = shape >= 240 ? in.ConsumeIntegral<int32_t>() : (shape & 1 ? 2 : 4);
  expected.slots = shape >= 224 ? kvc_fuzz::ConsumeValue(in) : 1 + (shape >> 1) % 16;
  const uint8_t key = in.ConsumeIntegral<uint8_t>();
  if (key >= 192) expected.key = in.ConsumeRandomLengthString(40);
  if (key % 3 == 1) expected.key = "page-3";
  return expected;
}

bool ValidShape(const Expected& expected) {
  return expected.buffers >= 1 && expected.buffers <= kvcanary::runtime::kMaxRecordBlobBuffers &&
         expected.slots >= 1 && expected.slots <= 64;
}

// The blob under test: the rest of the input as it is, or a well-formed blob of the expected
// shape (payload from the input) with one byte flipped, cut off or appended now and then.
std::vector<uint8_t> ConsumeBlob(FuzzedDataProvider& in, const Expected& expected,
                                 std::vector<uint8_t>& well_formed) {
  if (!ValidShape(expected) || (in.ConsumeIntegral<uint8_t>() & 1) == 0) {
    return in.ConsumeRemainingBytes<uint8_t>();
  }
  const int64_t payload_bytes = RecordBlobBytes(expected.buffers, expected.slots) - 32;
  std::vector<uint8_t> payload = in.ConsumeBytes<uint8_t>(static_cast<size_t>(payload_bytes));
  payload.resize(static_cast<size_t>(payload_bytes));
  well_formed = EncodeRecordBlob(expected.key, expected.buffers, expected.slots, payload);
  std::vector<uint8_t> blob = well_formed;
  const uint8_t change = in.ConsumeIntegral<uint8_t>();
  const size_t at = in.ConsumeIntegralInRange<size_t>(0, blob.size() - 1);
  if (change % 4 == 1) blob[at] ^= in.ConsumeIntegral<uint8_t>();
  if (change % 4 == 2) blob.resize(at);
  if (change % 4 == 3) blob.push_back(in.ConsumeIntegral<uint8_t>());
  return blob;
}

// An accepted blob is the encoder's own bytes for the expected key and shape; a well-formed blob
// is accepted exactly when it is unchanged (a changed byte must not pass the checksum).
void CheckBlob(const std::vector<uint8_t>& blob, const Expected& expected,
               const std::vector<uint8_t>& well_formed) {
  const std::string problem = CheckRecordBlob(blob, expected.key, expected.buffers, expected.slots);
  if (!well_formed.empty() && problem.empty() != (blob == well_formed)) {
    Fail("a changed well-formed blob was accepted, or an unchanged one refused: " + problem);
  }
  if (!problem.empty()) return;
  if (static_cast<int64_t>(blob.size()) != RecordBlobBytes(expected.buffers, expected.slots)) {
    Fail("an accepted blob's size is not RecordBlobBytes of its shape");
  }
  const std::vector<uint8_t> payload(blob.begin() + 32, blob.end());
  if (EncodeRecordBlob(expected.key, expected.buffers, expected.slots, payload) != blob) {
    Fail("an accepted blob is not the encoder's bytes for its key and shape");
  }
}

// One directory for the run, removed at exit.
const std::string& StoreDirectory() {
  static const std::string directory = [] {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "kvc-fuzz-blob.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) Fail("mkdtemp failed");
    static const std::string removed_at_exit = pattern;
    std::atexit([] { std::filesystem::remove_all(removed_at_exit); });
    return pattern;
  }();
  return directory;
}

// The bytes as the page file of `key` (through Put, or written over it as a disk fault would),
// read back with Get: exactly the bytes when their size is the one expected, else a size error
// naming the stored size; an invalid key or expected size is a kv-canary error that wrote nothing.
void CheckFileRead(const std::vector<uint8_t>& bytes, const Expected& expected,
                   int64_t expected_bytes, bool through_put) {
  FilePageStore store(StoreDirectory());
  try {
    kvcanary::runtime::CheckPageStoreKey(expected.key);
  } catch (const kvcanary::Error& error) {
    kvc_fuzz::RequirePrefix(error, "kv-canary: ");
    if (!std::filesystem::is_empty(StoreDirectory())) Fail("a refused key left a file");
    return;
  }
  if (through_put) {
    store.Put(expected.key, bytes);
  } else {
    std::ofstream(store.PathOf(expected.key), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  try {
    const std::optional<std::vector<uint8_t>> read = store.Get(expected.key, expected_bytes);
    if (!read.has_value()) Fail("a stored page read as a miss");
    if (*read != bytes) Fail("a page file read back other bytes");
  } catch (const PageSizeError& error) {
    kvc_fuzz::RequirePrefix(error, "kv-canary: ");
    if (error.stored_bytes() != static_cast<int64_t>(bytes.size()) ||
        error.stored_bytes() == expected_bytes) {
      Fail(std::string("a size error that names the wrong size: ") + error.what());
    }
  } catch (const kvcanary::Error& error) {
    kvc_fuzz::RequirePrefix(error, "kv-canary: ");
  }
  if (!store.Erase(expected.key) || store.Get(expected.key, 0).has_value()) {
    Fail("an erased page is still there");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Expected expected = ConsumeExpected(in);
  // The size a load asks the store for: the expected shape's, or any value now and then.
  const uint8_t sizing = in.ConsumeIntegral<uint8_t>();
  const bool through_put = (sizing & 1) != 0;
  int64_t expected_bytes = sizing >= 240 ? in.ConsumeIntegral<int64_t>() : 0;
  if (sizing < 240 && ValidShape(expected)) {
    expected_bytes = RecordBlobBytes(expected.buffers, expected.slots);
  }
  std::vector<uint8_t> well_formed;
  const std::vector<uint8_t> blob = ConsumeBlob(in, expected, well_formed);
  CheckBlob(blob, expected, well_formed);
  CheckFileRead(blob, expected, expected_bytes, through_put);
  return 0;
}
