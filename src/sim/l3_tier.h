// The L3 tier below the engine's host tier (--l3-slots): the books of which host-only radix slots
// live in host memory and which in the page store, and the store itself.
//
// With L3 on, the radix cache's host slots are tier ids, [0, host_slots + l3_slots): each names a
// token whose KV sits in a physical host slot or in L3. The ids one backup created form a page;
// a full host tier moves its oldest page down to L3 (KV into `kv`, canary records into `store`
// as one blob per block of kBlockTokens ids, each under its own key, as HiCache stores
// fixed-size pages), and a prefix hit on a page in L3 loads the whole page back into host slots
// before the restore to the device.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/runtime/page_store.h"

namespace kvcanary::sim {

struct L3Tier {
  struct Page {
    std::vector<int64_t> ids;  // in backup order; in L3, also the ids the radix cache released
    bool in_l3 = false;
    std::vector<std::string> keys;  // while in L3: the store key of each block of the page
    std::vector<bool> dead;    // in L3: per id, released by the radix cache (kept for the blob)
  };

  // Ids per stored blob: a page's ids in order, cut into blocks of this many (the last shorter).
  static constexpr int64_t kBlockTokens = 16;

  explicit L3Tier(int64_t ids) : host_slot(ids, -1), page_of(ids, -1) {
    for (int64_t id = ids - 1; id >= 0; --id) free_ids.push_back(id);
  }

  // A store key for a block of `length` ids moving down: a place in L3 that blocks of that length
  // reuse once the block holding it comes back up, so the key's previous blobs are older blocks'
  // (what l3_stale returns). No two blocks in L3 hold one key at once. Keys are reused oldest
  // first: a block that goes down again soon after it came up rarely gets its own old key back.
  std::string TakeKey(int64_t length) {
    std::deque<int64_t>& free = free_keys[length];
    int64_t index = 0;
    if (free.empty()) {
      index = next_key[length]++;
    } else {
      index = free.back();
      free.pop_back();
    }
    // Appended piece by piece: GCC 12 at -O3 (the sim preset) warns falsely (-Wrestrict, an error
    // with -Werror) on "literal" + std::to_string(...).
    std::string key = "n";
    key += std::to_string(length);
    key += "-k";
    key += std::to_string(index);
    return key;
  }
  void ReturnKey(const std::string& key) {
    const size_t split = key.find("-k");
    free_keys[std::stoll(key.substr(1, split - 1))].push_back(std::stoll(key.substr(split + 2)));
  }

  std::vector<int64_t> host_slot;  // per id: its physical host slot, -1 in L3 or free
  std::vector<int64_t> page_of;    // per id: its page, -1 when free
  std::vector<int64_t> free_ids;   // LIFO
  std::map<int64_t, Page> pages;   // by creation order: the first page in host is the oldest
  int64_t next_page = 0;
  std::map<int64_t, std::vector<uint8_t>> kv;                  // per id in L3: all layers' K, V
  std::map<int64_t, std::pair<int64_t, int64_t>> contents;     // per id in L3: (token, position)
  runtime::MemoryPageStore store;                              // the canary's record blobs
  // Per key: the blobs it held before, newest last, at most kOlderVersions of them.
  static constexpr size_t kOlderVersions = 4;
  std::map<std::string, std::vector<std::vector<uint8_t>>> previous;
  std::map<int64_t, std::deque<int64_t>> free_keys;            // per page length, FIFO
  std::map<int64_t, int64_t> next_key;                         // per page length
};

}  // namespace kvcanary::sim
