// PageStore: the L3 tier below the host pool (storage an engine offloads whole pages to), and the
// two stores kvcanary ships: one file per key under a directory, and one in memory for tests.
//
// A store holds opaque byte strings under keys. It knows nothing of canary records; the runtime
// packs a page's records into one blob (CanaryManager::OffloadToStore) and checks it when it
// comes back (LoadFromStore). Keys are 1-128 characters of [A-Za-z0-9._-] not starting with '.',
// so a key is also a safe file name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/error.h"

namespace kvcanary::runtime {

// Get found an entry whose size is not the one the reader expects (a short, truncated or foreign
// blob): never read, never a miss.
class PageSizeError : public Error {
 public:
  PageSizeError(const std::string& message, int64_t stored_bytes)
      : Error(message), stored_bytes_(stored_bytes) {}
  int64_t stored_bytes() const { return stored_bytes_; }

 private:
  int64_t stored_bytes_;
};

class PageStore {
 public:
  virtual ~PageStore() = default;
  // Stores `bytes` under `key`, replacing any entry. A reader sees the old entry or the new one,
  // never a part of either.
  virtual void Put(const std::string& key, const std::vector<uint8_t>& bytes) = 0;
  // The entry under `key`, or nullopt when there is none. Reads nothing and throws PageSizeError
  // when the entry does not hold exactly `expected_bytes` bytes.
  virtual std::optional<std::vector<uint8_t>> Get(const std::string& key,
                                                  int64_t expected_bytes) = 0;
  // Removes the entry; false when there was none.
  virtual bool Erase(const std::string& key) = 0;
};

// Largest entry a store accepts (Put) or reads (Get): 64 MiB, far above one page's records.
inline constexpr int64_t kMaxPageStoreEntryBytes = int64_t{64} << 20;

// Throws kvcanary::Error unless `key` is a valid store key.
void CheckPageStoreKey(const std::string& key);

class MemoryPageStore final : public PageStore {
 public:
  void Put(const std::string& key, const std::vector<uint8_t>& bytes) override;
  std::optional<std::vector<uint8_t>> Get(const std::string& key, int64_t expected_bytes) override;
  bool Erase(const std::string& key) override;
  size_t size() const { return entries_.size(); }
  // The stored bytes of `key`, for tests and fault injection (null when absent).
  std::vector<uint8_t>* Find(const std::string& key);

 private:
  std::map<std::string, std::vector<uint8_t>> entries_;
};

// One file `<directory>/<key>.page` per entry, written to a temporary file in the same directory
// and renamed over the old one, so a crash leaves the old entry or the new one.
class FilePageStore final : public PageStore {
 public:
  // The directory must exist; kvcanary::Error otherwise.
  explicit FilePageStore(std::string directory);
  void Put(const std::string& key, const std::vector<uint8_t>& bytes) override;
  std::optional<std::vector<uint8_t>> Get(const std::string& key, int64_t expected_bytes) override;
  bool Erase(const std::string& key) override;
  std::string PathOf(const std::string& key) const;

 private:
  std::string directory_;
};

}  // namespace kvcanary::runtime
