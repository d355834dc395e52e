// The L3 tier below the host tier (--l3-slots, l3_tier.h): backups take tier ids, a full host
// tier moves its oldest page down (KV to L3, canary records through OffloadToStore), and a
// restore of a page in L3 loads the whole page back into host slots first (LoadFromStore), then
// restores as the host tier always does.
#include <algorithm>
#include <stdexcept>

#include "sim/engine.h"

namespace kvcanary::sim {
namespace {

void Fail(const std::string& what) { throw std::logic_error("kv-canary sim: L3: " + what); }

// The block of a page's slots that starts at `begin`: kBlockTokens of them, or the rest.
std::vector<int64_t> BlockOf(const std::vector<int64_t>& slots, size_t begin) {
  const size_t end = std::min(slots.size(), begin + static_cast<size_t>(L3Tier::kBlockTokens));
  return std::vector<int64_t>(slots.begin() + begin, slots.begin() + end);
}

}  // namespace

std::vector<int64_t> Engine::BackupToTier(const std::vector<int64_t>& device_slots) {
  const size_t count = device_slots.size();
  // Host tier and L3 full, or a node larger than the host tier: drop the node.
  if (l3_->free_ids.size() < count || static_cast<int64_t>(count) > options_.host_slots) return {};
  MakeHostRoom(static_cast<int64_t>(count), -1);
  const std::vector<int64_t> host_slots = CopyToHost(device_slots);
  const int64_t page = l3_->next_page++;
  L3Tier::Page& entry = l3_->pages[page];
  for (const int64_t host_slot : host_slots) {
    const int64_t id = l3_->free_ids.back();
    l3_->free_ids.pop_back();
    l3_->host_slot[id] = host_slot;
    l3_->page_of[id] = page;
    entry.ids.push_back(id);
  }
  return entry.ids;
}

void Engine::MakeHostRoom(int64_t slots, int64_t keep) {
  auto next = l3_->pages.begin();
  while (static_cast<int64_t>(host_free_.size()) < slots) {
    while (next != l3_->pages.end() && (next->second.in_l3 || next->first == keep)) ++next;
    if (next == l3_->pages.end()) Fail("no page in host to move down");
    const int64_t page = next->first;
    ++next;
    MovePageDown(page);
  }
}

void Engine::MovePageDown(int64_t page) {
  L3Tier::Page& entry = l3_->pages.at(page);
  std::vector<int64_t> host_slots;
  for (const int64_t id : entry.ids) host_slots.push_back(l3_->host_slot[id]);
  for (size_t begin = 0; begin < host_slots.size(); begin += L3Tier::kBlockTokens) {
    const std::vector<int64_t> block = BlockOf(host_slots, begin);
    entry.keys.push_back(l3_->TakeKey(static_cast<int64_t>(block.size())));
    if (canary_) {
      canary_->OffloadToStore(runtime::GroupKind::kFull, block, l3_->store, entry.keys.back());
    }
  }
  for (size_t i = 0; i < entry.ids.size(); ++i) {
    const int64_t id = entry.ids[i];
    l3_->kv[id] = std::move(host_kv_[host_slots[i]]);
    host_kv_[host_slots[i]].clear();
    l3_->contents[id] = host_contents_[host_slots[i]];
    l3_->host_slot[id] = -1;
    host_free_.push_back(host_slots[i]);
  }
  entry.in_l3 = true;
  entry.dead.assign(entry.ids.size(), false);
}

void Engine::RestoreFromTier(const std::vector<int64_t>& ids,
                             const std::vector<int64_t>& device_slots) {
  const int64_t page = l3_->page_of.at(ids.front());
  if (page < 0) Fail("restore of a free tier id");
  if (l3_->pages.at(page).in_l3) LoadPageUp(page, ids, device_slots);
  std::vector<int64_t> host_slots;
  for (const int64_t id : ids) {
    if (l3_->page_of[id] != page || l3_->host_slot[id] < 0) Fail("restore across pages");
    host_slots.push_back(l3_->host_slot[id]);
  }
  CopyFromHost(host_slots, device_slots);  // returns the host slots to host_free_
  for (const int64_t id : ids) l3_->host_slot[id] = -1;
  ReleaseTierIds(ids);
}

void Engine::LoadPageUp(int64_t page, const std::vector<int64_t>& requested,
                        const std::vector<int64_t>& device_slots) {
  MakeHostRoom(static_cast<int64_t>(l3_->pages.at(page).ids.size()), page);
  L3Tier::Page& entry = l3_->pages.at(page);
  std::vector<int64_t> host_slots;
  for (const int64_t id : entry.ids) {
    const int64_t host_slot = host_free_.back();
    host_free_.pop_back();
    host_kv_[host_slot] = std::move(l3_->kv.at(id));
    host_contents_[host_slot] = l3_->contents.at(id);
    l3_->kv.erase(id);
    l3_->contents.erase(id);
    l3_->host_slot[id] = host_slot;
    host_slots.push_back(host_slot);
  }
  const bool whole_page = requested == entry.ids;
  for (size_t b = 0; b < entry.keys.size(); ++b) {
    const size_t begin = b * L3Tier::kBlockTokens;
    if (hooks_ != nullptr) {
      hooks_->OnL3Load(*this, entry.keys[b],
                       whole_page ? BlockOf(device_slots, begin) : std::vector<int64_t>{});
    }
    if (canary_) LoadRecordsFromL3(entry.keys[b], BlockOf(host_slots, begin));
    RetireKey(entry.keys[b]);
  }
  entry.keys.clear();
  std::vector<int64_t> dead;
  for (size_t i = 0; i < entry.ids.size(); ++i) {
    if (entry.dead[i]) dead.push_back(entry.ids[i]);
  }
  entry.in_l3 = false;
  entry.dead.clear();
  ReleaseTierIds(dead);  // released while the page was down: kept only for its blob
}

void Engine::LoadRecordsFromL3(const std::string& key, const std::vector<int64_t>& host_slots) {
  runtime::StoreLoadResult result = LoadFromL3Store(key, host_slots);
  if (result.status == runtime::StoreLoadStatus::kCorrupt) {
    // Corruption is reported, never a miss; the fault injector may put a good copy back. The
    // simulator cannot rebuild a page that is neither in the host tier nor intact in L3: an
    // unrepaired one stops the run, as a raise would.
    if (hooks_ == nullptr || !hooks_->OnL3Corruption(*this, result.message)) {
      throw runtime::ViolationError(result.message);
    }
    result = LoadFromL3Store(key, host_slots);
  }
  if (result.status != runtime::StoreLoadStatus::kLoaded) {
    Fail("page " + key + " has no stored records" +
         (result.message.empty() ? "" : " (" + result.message + ")"));
  }
}

runtime::StoreLoadResult Engine::LoadFromL3Store(const std::string& key,
                                                 const std::vector<int64_t>& host_slots) {
  // A runtime that raises throws the report that one in mode log returns.
  try {
    return canary_->LoadFromStore(runtime::GroupKind::kFull, host_slots, l3_->store, key);
  } catch (const runtime::ViolationError& error) {
    return runtime::StoreLoadResult{runtime::StoreLoadStatus::kCorrupt, error.what()};
  }
}

void Engine::RetireKey(const std::string& key) {
  // The blob stays behind as the key's previous version, as on a store that only overwrites.
  if (const std::vector<uint8_t>* blob = l3_->store.Find(key)) {
    std::vector<std::vector<uint8_t>>& older = l3_->previous[key];
    older.push_back(*blob);
    if (older.size() > L3Tier::kOlderVersions) older.erase(older.begin());
    l3_->store.Erase(key);
  }
  l3_->ReturnKey(key);
}

void Engine::ReleaseTierIds(const std::vector<int64_t>& ids) {
  for (const int64_t id : ids) {
    const int64_t page = l3_->page_of.at(id);
    if (page < 0) Fail("release of a free tier id");
    L3Tier::Page& entry = l3_->pages.at(page);
    if (entry.in_l3) {
      // Its blob covers every id of the page: keep the id until the page resolves.
      for (size_t i = 0; i < entry.ids.size(); ++i) {
        if (entry.ids[i] == id) entry.dead[i] = true;
      }
      bool all_dead = true;
      for (const bool dead : entry.dead) all_dead = all_dead && dead;
      if (!all_dead) continue;
      for (const std::string& key : entry.keys) RetireKey(key);
      for (const int64_t gone : entry.ids) {
        l3_->kv.erase(gone);
        l3_->contents.erase(gone);
        l3_->page_of[gone] = -1;
        l3_->free_ids.push_back(gone);
      }
      l3_->pages.erase(page);
      continue;
    }
    // A restored id's host slot is already back (RestoreFromTier cleared it).
    if (l3_->host_slot[id] >= 0) host_free_.push_back(l3_->host_slot[id]);
    l3_->host_slot[id] = -1;
    l3_->page_of[id] = -1;
    l3_->free_ids.push_back(id);
    std::erase(entry.ids, id);
    if (entry.ids.empty()) l3_->pages.erase(page);
  }
}

}  // namespace kvcanary::sim
