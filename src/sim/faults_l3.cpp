// The L3 tier's fault classes: a byte of a stored record blob flipped (l3_corrupt), and a stale
// blob (the one an older page left under the same key) returned for the key (l3_stale).
#include <algorithm>
#include <cstring>
#include <sstream>

#include "sim/faults.h"

namespace kvcanary::sim {
namespace {

constexpr int64_t kBlobHeaderBytes = 32;  // the record blob's header (docs/integration.md)
constexpr int64_t kRecordBytes = 32;
constexpr int kBlobBuffers = 4;  // k_head, v_head, k_tail, v_tail: the simulator's FULL group

// Slot `i` of `n`'s four records in a blob (each buffer holds the page's records in order).
std::vector<uint8_t> SlotRecords(const std::vector<uint8_t>& blob, size_t i, size_t n) {
  std::vector<uint8_t> records;
  for (int b = 0; b < kBlobBuffers; ++b) {
    const uint8_t* record = blob.data() + kBlobHeaderBytes + (b * n + i) * kRecordBytes;
    records.insert(records.end(), record, record + kRecordBytes);
  }
  return records;
}

// (token, position) of the k_tail record among a slot's four.
std::pair<int64_t, int64_t> RecordContent(const std::vector<uint8_t>& records) {
  int64_t token = 0, position = 0;
  std::memcpy(&token, records.data() + 2 * kRecordBytes, 8);
  std::memcpy(&position, records.data() + 2 * kRecordBytes + 8, 8);
  return {token, position};
}

}  // namespace

void FaultInjector::OnL3Load(Engine& engine, const std::string& key,
                             const std::vector<int64_t>& device_slots) {
  // Whole-page loads only: every record of the blob lands in these device slots.
  if (device_slots.empty()) return;
  std::vector<uint8_t>* stored = engine.l3()->store.Find(key);
  if (Due(FaultKind::kL3Corrupt)) {
    Open& open = Start(FaultKind::kL3Corrupt, "L3 page " + key + ": a byte of its stored record blob flipped");
    open.slots.insert(device_slots.begin(), device_slots.end());
    if (stored == nullptr) return;  // --mode none: no records were stored
    l3_corrupt_key_ = key;
    l3_corrupt_original_ = *stored;
    const int64_t byte = Uniform(kBlobHeaderBytes, static_cast<int64_t>(stored->size()) - 1);
    (*stored)[byte] ^= static_cast<uint8_t>(1u << Uniform(0, 7));
    return;
  }
  if (!Due(FaultKind::kL3Stale)) return;
  std::vector<uint8_t> fresh;
  if (stored != nullptr) {
    // The newest blob an older page left under this key whose records differ from this page's.
    const std::vector<std::vector<uint8_t>>& older = engine.l3()->previous[key];
    const auto stale = std::find_if(older.rbegin(), older.rend(),
                                    [&](const std::vector<uint8_t>& blob) { return blob != *stored; });
    if (stale == older.rend()) return;
    fresh = *stored;
    *stored = *stale;
  }
  Open& open = Start(FaultKind::kL3Stale, "L3 page " + key + ": the key's previous blob returned");
  open.slots.insert(device_slots.begin(), device_slots.end());
  open.abort_victims = true;
  if (fresh.empty()) return;
  open.undo = [device_slots, fresh](Engine& e) {
    // The restored slots that still hold what the page held get their own records back.
    for (size_t i = 0; i < device_slots.size(); ++i) {
      const std::vector<uint8_t> records = SlotRecords(fresh, i, device_slots.size());
      if (e.SlotContent(device_slots[i]) == RecordContent(records)) {
        e.WriteCanaryRecords(device_slots[i], records);
      }
    }
  };
}

bool FaultInjector::OnL3Corruption(Engine& engine, const std::string& message) {
  (void)engine;
  for (Open& open : opens_) {
    Injection& injection = injections_[open.index];
    if (open.closed_step >= 0 || injection.fault != FaultKind::kL3Corrupt || l3_corrupt_key_.empty()) {
      continue;
    }
    injection.detected = true;
    injection.detected_step = step_;
    injection.detected_by = "CANARY_L3_LOAD " + message.substr(message.find("corrupt: ") + 9);
    injection.detected_forwards = ForwardsThrough(open, step_);
    *engine.l3()->store.Find(l3_corrupt_key_) = l3_corrupt_original_;
    l3_corrupt_key_.clear();
    return true;
  }
  return false;
}

void FaultInjector::AdoptL3Victims(Engine& engine, const Batch& batch) {
  for (Open& open : opens_) {
    if (open.closed_step >= 0 || injections_[open.index].fault != FaultKind::kL3Stale) continue;
    for (const BatchRow& row : batch.rows) {
      for (int64_t slot : open.slots) {
        if (RowHolds(engine, *row.req, slot)) open.victims.insert(row.req->spec.id);
      }
    }
  }
}

}  // namespace kvcanary::sim
