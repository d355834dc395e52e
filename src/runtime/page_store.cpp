// The L3 stores: key checks shared by both, the memory map, and the file-per-key directory with
// its temp-file-and-rename write.
#include "kvcanary/runtime/page_store.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace kvcanary::runtime {
namespace {

constexpr size_t kMaxKeyChars = 128;

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

void CheckExpectedBytes(int64_t expected_bytes) {
  if (expected_bytes < 0 || expected_bytes > kMaxPageStoreEntryBytes) {
    ThrowError("kv-canary: expected_bytes must be in [0, ", kMaxPageStoreEntryBytes, "], got ",
               expected_bytes);
  }
}

void CheckEntryBytes(const std::vector<uint8_t>& bytes) {
  if (static_cast<int64_t>(bytes.size()) > kMaxPageStoreEntryBytes) {
    ThrowError("kv-canary: page store entry must hold at most ", kMaxPageStoreEntryBytes,
               " bytes, got ", bytes.size());
  }
}

[[noreturn]] void ThrowSizeMismatch(const std::string& key, int64_t expected, int64_t stored) {
  throw PageSizeError("kv-canary: page store entry '" + key + "' must hold " +
                          std::to_string(expected) + " bytes, got " + std::to_string(stored),
                      stored);
}

}  // namespace

void CheckPageStoreKey(const std::string& key) {
  bool valid = !key.empty() && key.size() <= kMaxKeyChars && key[0] != '.';
  for (char c : key) valid = valid && IsKeyChar(c);
  if (!valid) {
    ThrowError("kv-canary: page store key must be 1-", kMaxKeyChars,
               " characters of [A-Za-z0-9._-] not starting with '.', got '", key, "'");
  }
}

void MemoryPageStore::Put(const std::string& key, const std::vector<uint8_t>& bytes) {
  CheckPageStoreKey(key);
  CheckEntryBytes(bytes);
  entries_[key] = bytes;
}

std::optional<std::vector<uint8_t>> MemoryPageStore::Get(const std::string& key,
                                                         int64_t expected_bytes) {
  CheckPageStoreKey(key);
  CheckExpectedBytes(expected_bytes);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const int64_t stored = static_cast<int64_t>(it->second.size());
  if (stored != expected_bytes) ThrowSizeMismatch(key, expected_bytes, stored);
  return it->second;
}

bool MemoryPageStore::Erase(const std::string& key) {
  CheckPageStoreKey(key);
  return entries_.erase(key) > 0;
}

std::vector<uint8_t>* MemoryPageStore::Find(const std::string& key) {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

FilePageStore::FilePageStore(std::string directory) : directory_(std::move(directory)) {
  std::error_code error;
  if (!std::filesystem::is_directory(directory_, error)) {
    ThrowError("kv-canary: page store directory must exist, got '", directory_, "'");
  }
}

std::string FilePageStore::PathOf(const std::string& key) const {
  return directory_ + "/" + key + ".page";
}

void FilePageStore::Put(const std::string& key, const std::vector<uint8_t>& bytes) {
  CheckPageStoreKey(key);
  CheckEntryBytes(bytes);
  // A leading '.' keeps the temporary name out of the key space; pid and counter keep two
  // writers of one key apart.
  static std::atomic<uint64_t> counter{0};
  const std::string temp = directory_ + "/." + key + "." + std::to_string(::getpid()) + "." +
                           std::to_string(counter.fetch_add(1)) + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      ThrowError("kv-canary: page store could not write '", temp, "': ", std::strerror(errno));
    }
  }
  if (std::rename(temp.c_str(), PathOf(key).c_str()) != 0) {
    const int saved = errno;
    std::remove(temp.c_str());
    ThrowError("kv-canary: page store could not rename '", temp, "' to '", PathOf(key),
               "': ", std::strerror(saved));
  }
}

std::optional<std::vector<uint8_t>> FilePageStore::Get(const std::string& key,
                                                       int64_t expected_bytes) {
  CheckPageStoreKey(key);
  CheckExpectedBytes(expected_bytes);
  std::ifstream in(PathOf(key), std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  // The size is checked before anything is allocated: a corrupted or foreign file never sizes
  // the read.
  const int64_t stored = static_cast<int64_t>(in.tellg());
  if (stored != expected_bytes) ThrowSizeMismatch(key, expected_bytes, stored);
  std::vector<uint8_t> bytes(static_cast<size_t>(expected_bytes));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    ThrowSizeMismatch(key, expected_bytes, static_cast<int64_t>(in.gcount()));
  }
  return bytes;
}

bool FilePageStore::Erase(const std::string& key) {
  CheckPageStoreKey(key);
  return std::remove(PathOf(key).c_str()) == 0;
}

}  // namespace kvcanary::runtime
