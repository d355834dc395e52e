// PageStore: the memory and file stores keep whole entries under checked keys, refuse an entry of
// the wrong size before reading it, and (file) replace an entry atomically.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kvcanary/runtime/page_store.h"
#include "runtime/error_message.h"

namespace kvcanary::runtime {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system's temporary directory, removed with its contents.
class TempDirectory {
 public:
  TempDirectory() {
    std::string pattern = (fs::temp_directory_path() / "kvc_page_store_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDirectory() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::vector<uint8_t> kPage = {1, 2, 3, 4, 5, 6, 7, 8, 9};

class PageStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  PageStoreTest() {
    if (GetParam()) {
      store_ = std::make_unique<FilePageStore>(directory_.path());
    } else {
      store_ = std::make_unique<MemoryPageStore>();
    }
  }
  TempDirectory directory_;
  std::unique_ptr<PageStore> store_;
};

TEST_P(PageStoreTest, RoundTripReturnsTheBytesStored) {
  store_->Put("page-7", kPage);
  EXPECT_EQ(store_->Get("page-7", 9), kPage);
  store_->Put("page-7", {9, 9, 9});
  EXPECT_EQ(store_->Get("page-7", 3), std::vector<uint8_t>({9, 9, 9}));
}

TEST_P(PageStoreTest, MissingKeyIsNullopt) {
  EXPECT_FALSE(store_->Get("never.stored", 9).has_value());
  store_->Put("page_1", kPage);
  EXPECT_TRUE(store_->Erase("page_1"));
  EXPECT_FALSE(store_->Erase("page_1"));
  EXPECT_FALSE(store_->Get("page_1", 9).has_value());
}

TEST_P(PageStoreTest, EntryOfAnotherSizeIsRefusedNotMissed) {
  store_->Put("page", kPage);
  try {
    store_->Get("page", 10);
    FAIL() << "no PageSizeError";
  } catch (const PageSizeError& error) {
    EXPECT_EQ(std::string(error.what()), "kv-canary: page store entry 'page' must hold 10 bytes, got 9");
    EXPECT_EQ(error.stored_bytes(), 9);
  }
}

TEST_P(PageStoreTest, KeysAreChecked) {
  for (const std::string& key :
       std::vector<std::string>{"", ".hidden", "a/b", "../x", std::string(129, 'k'), "sp ace"}) {
    EXPECT_EQ(ErrorMessage([&] { store_->Put(key, kPage); }),
              "kv-canary: page store key must be 1-128 characters of [A-Za-z0-9._-] not starting "
              "with '.', got '" + key + "'");
  }
  EXPECT_NO_THROW(store_->Put(std::string(128, 'k'), kPage));
}

TEST_P(PageStoreTest, ExpectedBytesAreBounded) {
  EXPECT_EQ(ErrorMessage([&] { store_->Get("page", kMaxPageStoreEntryBytes + 1); }),
            "kv-canary: expected_bytes must be in [0, 67108864], got 67108865");
  EXPECT_EQ(ErrorMessage([&] { store_->Get("page", -1); }),
            "kv-canary: expected_bytes must be in [0, 67108864], got -1");
}

INSTANTIATE_TEST_SUITE_P(Stores, PageStoreTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "File" : "Memory"; });

TEST(FilePageStore, WritesOneFilePerKeyAndLeavesNoTemporaryFile) {
  TempDirectory directory;
  FilePageStore store(directory.path());
  store.Put("a", kPage);
  store.Put("a", {1});
  store.Put("b", kPage);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory.path())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, std::vector<std::string>({"a.page", "b.page"}));
  EXPECT_EQ(fs::file_size(store.PathOf("a")), 1u);
}

TEST(FilePageStore, AnInterruptedWriteLeavesTheOldEntry) {
  TempDirectory directory;
  FilePageStore store(directory.path());
  store.Put("a", kPage);
  // A writer that died before its rename leaves only its temporary file behind.
  std::ofstream(directory.path() + "/.a.1.0.tmp", std::ios::binary) << "partial";
  EXPECT_EQ(store.Get("a", 9), kPage);
  EXPECT_FALSE(store.Get("b", 7).has_value());
}

TEST(FilePageStore, ShortFileIsRefusedBeforeReading) {
  TempDirectory directory;
  FilePageStore store(directory.path());
  store.Put("a", kPage);
  fs::resize_file(store.PathOf("a"), 4);
  EXPECT_THROW(store.Get("a", 9), PageSizeError);
  // A huge foreign file is refused by its size, not read.
  fs::resize_file(store.PathOf("a"), int64_t{1} << 30);
  try {
    store.Get("a", 9);
    FAIL() << "no PageSizeError";
  } catch (const PageSizeError& error) {
    EXPECT_EQ(error.stored_bytes(), int64_t{1} << 30);
  }
}

TEST(FilePageStore, DirectoryMustExist) {
  EXPECT_EQ(ErrorMessage([] { FilePageStore("/nonexistent/kvc_pages"); }),
            "kv-canary: page store directory must exist, got '/nonexistent/kvc_pages'");
}

}  // namespace
}  // namespace kvcanary::runtime
