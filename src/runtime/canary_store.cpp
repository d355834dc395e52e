// The L3 tier of the offload sidecar: a page's records move from the host mirrors into a record
// blob in a PageStore, and back. A blob that comes back wrong (size, header, key, checksum) or
// whose records do not match the host KV is corruption, reported as a violation (raised when the
// runtime raises, else returned as kCorrupt): never a miss.
#include <cstring>

#include "kvcanary/runtime/page_store.h"
#include "runtime/canary_impl.h"
#include "runtime/record_blob.h"

namespace kvcanary::runtime {
namespace {

void CheckHostIndices(const GroupState& group, const std::vector<int64_t>& host_indices,
                      const char* what) {
  if (group.host_slots <= 0) {
    ThrowError("kv-canary: missing HiCache host size for ", GroupKindName(group.spec.kind));
  }
  if (host_indices.empty()) {
    ThrowError("kv-canary: ", what, " host_indices must name at least one slot, got none");
  }
  for (const int64_t slot : host_indices) {
    if (slot < 0 || slot >= group.host_slots) {
      ThrowError("kv-canary: ", what, " host index must be in [0, ", group.host_slots, "), got ",
                 slot);
    }
  }
}

std::vector<int> AllocatedBuffers(const GroupState& group) {
  std::vector<int> list;
  for (int b = 0; b < 4; ++b) {
    if (group.host_mirrors[b].data() != nullptr) list.push_back(b);
  }
  return list;
}

// The records of `host_indices`, buffer by buffer (the blob's payload order).
std::vector<uint8_t> GatherRecords(const GroupState& group,
                                   const std::vector<int64_t>& host_indices) {
  std::vector<uint8_t> payload;
  payload.reserve(AllocatedBuffers(group).size() * host_indices.size() * kCanarySlotBytes);
  for (const int b : AllocatedBuffers(group)) {
    const uint8_t* mirror = group.host_mirrors[b].data_as<uint8_t>();
    for (const int64_t slot : host_indices) {
      const uint8_t* record = mirror + kCanarySlotBytes * slot;
      payload.insert(payload.end(), record, record + kCanarySlotBytes);
    }
  }
  return payload;
}

void ScatterRecords(GroupState& group, const std::vector<int64_t>& host_indices,
                    const uint8_t* payload) {
  for (const int b : AllocatedBuffers(group)) {
    uint8_t* mirror = group.host_mirrors[b].data_as<uint8_t>();
    for (const int64_t slot : host_indices) {
      std::memcpy(mirror + kCanarySlotBytes * slot, payload, kCanarySlotBytes);
      payload += kCanarySlotBytes;
    }
  }
}

int64_t BlobBytesOf(const GroupState& group, const std::vector<int64_t>& host_indices) {
  const int64_t bytes =
      RecordBlobBytes(static_cast<int>(AllocatedBuffers(group).size()),
                      static_cast<int64_t>(host_indices.size()));
  if (bytes > kMaxPageStoreEntryBytes) {
    ThrowError("kv-canary: a stored page's record blob must hold at most ",
               kMaxPageStoreEntryBytes, " bytes, got ", bytes, " (", host_indices.size(),
               " slots)");
  }
  return bytes;
}

// What the store holds under `key`: no entry (a miss), a blob whose size, header, key hash and
// checksum passed, or what is wrong with the entry.
struct StoredBlob {
  std::optional<std::vector<uint8_t>> blob;
  std::string problem;  // non-empty: the entry is corrupt
};

StoredBlob ReadCheckedBlob(const GroupState& group, const std::vector<int64_t>& host_indices,
                           PageStore& store, const std::string& key) {
  const int64_t expected_bytes = BlobBytesOf(group, host_indices);
  StoredBlob stored;
  try {
    stored.blob = store.Get(key, expected_bytes);
  } catch (const PageSizeError& error) {
    stored.problem = "blob bytes must be " + std::to_string(expected_bytes) + ", got " +
                     std::to_string(error.stored_bytes());
    return stored;
  }
  if (!stored.blob.has_value()) return stored;
  const int buffers = static_cast<int>(AllocatedBuffers(group).size());
  stored.problem =
      CheckRecordBlob(*stored.blob, key, buffers, static_cast<int64_t>(host_indices.size()));
  if (!stored.problem.empty()) stored.blob.reset();
  return stored;
}

constexpr const char* kErrorPrefix = "kv-canary: ";

}  // namespace

void CanaryManager::OffloadToStore(GroupKind kind, const std::vector<int64_t>& host_indices,
                                   PageStore& store, const std::string& key) {
  GroupState& group = impl_->GroupOf(kind, "offload to store");
  CheckHostIndices(group, host_indices, "offload to store");
  CheckPageStoreKey(key);
  BlobBytesOf(group, host_indices);
  // BackupRecords copies into the mirrors on the stream: those copies must have landed.
  SynchronizeStream(impl_->device_, impl_->stream_);
  const int buffers = static_cast<int>(AllocatedBuffers(group).size());
  store.Put(key, EncodeRecordBlob(key, buffers, static_cast<int64_t>(host_indices.size()),
                                  GatherRecords(group, host_indices)));
}

StoreLoadResult CanaryManager::Impl::ReportCorruptLoad(const GroupState& group,
                                                       const std::string& key,
                                                       const std::string& reason,
                                                       const std::string& message) {
  const std::string kind = GroupKindName(group.spec.kind);
  Log(LogLevel::kError, "CANARY_L3_LOAD CORRUPT [" + kind + "]: key=" + key + ": " + reason);
  reporter_.l3_corrupt_loads += 1;
  if (incident_file_.enabled()) {
    const std::string line = FormatL3LoadIncidentJson(step_.outer, kind, key, reason);
    if (const std::optional<std::string> warning = incident_file_.Append({line})) {
      Log(LogLevel::kWarning, *warning);
    }
  }
  if (config_.RaisesOnViolation()) throw ViolationError(message);
  return StoreLoadResult{StoreLoadStatus::kCorrupt, message};
}

StoreLoadResult CanaryManager::LoadFromStore(GroupKind kind,
                                             const std::vector<int64_t>& host_indices,
                                             PageStore& store, const std::string& key,
                                             const HostLayer0& host_layer0) {
  GroupState& group = impl_->GroupOf(kind, "load from store");
  CheckHostIndices(group, host_indices, "load from store");
  CheckPageStoreKey(key);
  std::array<std::optional<RealKvSource>, 2> verify_sources;
  if (impl_->config_.verify_backup) verify_sources = impl_->BackupSources(group, host_layer0);
  const StoredBlob stored = ReadCheckedBlob(group, host_indices, store, key);
  if (!stored.problem.empty()) {
    return impl_->ReportCorruptLoad(
        group, key, stored.problem,
        "kv-canary: CANARY_L3_LOAD: stored page '" + key + "' is corrupt: " + stored.problem);
  }
  if (!stored.blob.has_value()) return {};  // never stored (or erased): a true miss
  // Pending copies out of the mirrors must not see the new records; a failed verification
  // puts the old ones back, so a rejected load changes nothing.
  SynchronizeStream(impl_->device_, impl_->stream_);
  const std::vector<uint8_t> previous = GatherRecords(group, host_indices);
  ScatterRecords(group, host_indices, stored.blob->data() + kRecordBlobHeaderBytes);
  if (impl_->config_.verify_backup) {
    try {
      impl_->VerifyBackup(group, host_indices, verify_sources);
    } catch (const ViolationError& error) {
      // A stale page: intact and under its key, but not the records of the KV that came back.
      ScatterRecords(group, host_indices, previous.data());
      const std::string message = error.what();
      return impl_->ReportCorruptLoad(group, key, message.substr(std::strlen(kErrorPrefix)),
                                      message);
    }
  }
  return StoreLoadResult{StoreLoadStatus::kLoaded, ""};
}

}  // namespace kvcanary::runtime
