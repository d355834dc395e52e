// Host offload sidecar and PD splice: canary records move with the KV
// bytes they describe, with the same index mapping, so reloaded or transferred slots verify.
#include <cstring>
#include <iomanip>
#include <sstream>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "runtime/canary_impl.h"

namespace kvcanary::runtime {
namespace {

void CheckIndexPairs(const std::vector<int64_t>& host, const std::vector<int64_t>& device,
                     int64_t host_slots, int64_t device_slots, const char* what) {
  if (host.size() != device.size()) {
    ThrowError("kv-canary: HiCache ", what, " needs equal index counts, got ", host.size(),
               " host and ", device.size(), " device indices");
  }
  for (size_t i = 0; i < host.size(); ++i) {
    if (host[i] < 0 || host[i] >= host_slots || device[i] < 0 || device[i] >= device_slots) {
      ThrowError("kv-canary: HiCache ", what, " index pair (host ", host[i], ", device ",
                 device[i], ") is outside [0, ", host_slots, ") x [0, ", device_slots, ")");
    }
  }
}

enum class CopyDirection { kToHost, kToDevice };

// Copies the 32-byte record of each (host, device) index pair between every allocated device
// buffer of `group` and its host mirror, on `stream`.
void CopyRecords(const GroupState& group, CopyDirection direction,
                 const std::vector<int64_t>& host_indices,
                 const std::vector<int64_t>& device_indices, Device device, StreamHandle stream) {
  for (int b = 0; b < 4; ++b) {
    if (group.buffers[b].data() == nullptr) continue;
    char* host = group.host_mirrors[b].data_as<char>();
    char* on_device = group.buffers[b].data_as<char>();
    for (size_t i = 0; i < host_indices.size(); ++i) {
      char* host_record = host + kCanarySlotBytes * host_indices[i];
      char* device_record = on_device + kCanarySlotBytes * device_indices[i];
      if (direction == CopyDirection::kToHost) {
        CopyBytesAsync(host_record, device_record, kCanarySlotBytes, device, stream);
      } else {
        CopyBytesAsync(device_record, host_record, kCanarySlotBytes, device, stream);
      }
    }
  }
}

std::string Hex16(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::uppercase << std::hex << std::setw(16) << std::setfill('0') << value;
  return out.str();
}

}  // namespace

std::array<std::optional<RealKvSource>, 2> CanaryManager::Impl::BackupSources(
    const GroupState& group, const HostLayer0& host_layer0) const {
  std::array<std::optional<RealKvSource>, 2> out;
  for (int half = 0; half < 2; ++half) {
    const std::vector<RealKvSource>& sources = group.sources[half];
    if (sources.empty()) continue;
    const char* name = half == 0 ? "host_layer0.k" : "host_layer0.v";
    const TensorView& host = half == 0 ? host_layer0.k : host_layer0.v;
    if (!host.defined()) {
      ThrowError("kv-canary: verify_backup needs ", name,
                 " (the host copy of layer 0) in BackupRecords for group ",
                 GroupKindName(group.spec.kind));
    }
    if (host.device().type != DeviceType::kCPU) {
      ThrowError("kv-canary: ", name, " must be a CPU tensor, got ", host.device().ToString());
    }
    // The host pool keeps the device pool's layout: one source, as install builds it.
    const RealKvSource& device = sources[0];
    out[half] = MakeRealKvSource(host, device.page_size, device.num_bytes_per_token,
                                 device.read_bytes);
  }
  return out;
}

void CanaryManager::Impl::VerifyBackup(
    const GroupState& group, const std::vector<int64_t>& host_indices,
    const std::array<std::optional<RealKvSource>, 2>& sources) {
  if (host_indices.empty() || (!sources[0].has_value() && !sources[1].has_value())) return;
  // The record copies (and the engine's KV copy, enqueued before us) must have landed.
  SynchronizeStream(device_, stream_);
  const char* kind = GroupKindName(group.spec.kind);
  int64_t mismatches = 0;
  for (int half = 0; half < 2; ++half) {
    if (!sources[half].has_value()) continue;
    const RealKvSource& source = *sources[half];
    const char* buffer = half == 0 ? "k_tail" : "v_tail";
    const uint8_t* mirror = group.host_mirrors[2 + half].data_as<uint8_t>();
    const int64_t host_rows = source.tensor.size(0);
    for (const int64_t slot : host_indices) {
      if (slot / source.page_size >= host_rows) {
        Log(LogLevel::kWarning,
            "CANARY_VERIFY_BACKUP [" + std::string(kind) + "]: " + buffer + " slot=" +
                std::to_string(slot) + " is outside the host layer-0 copy (" +
                std::to_string(host_rows * source.page_size) + " slots); skipped");
        continue;
      }
      const uint64_t computed =
          RealKvHash(&source, 1, static_cast<int32_t>(config_.real_data), slot);
      uint64_t stored = 0;
      std::memcpy(&stored, mirror + kCanarySlotBytes * slot + 8 * kCanaryFieldRealKvHash, 8);
      if (stored != computed) {
        mismatches += 1;
        Log(LogLevel::kError, "CANARY_VERIFY_BACKUP MISMATCH [" + std::string(kind) + "]: " +
                                  buffer + " slot=" + std::to_string(slot) +
                                  " stored=" + Hex16(stored) + " computed=" + Hex16(computed));
      }
    }
  }
  if (mismatches > 0) {
    throw ViolationError("kv-canary: CANARY_VERIFY_BACKUP: " + std::to_string(mismatches) +
                         " hash mismatch(es) across " + std::to_string(host_indices.size()) +
                         " backed-up slots");
  }
}

GroupState& CanaryManager::Impl::GroupOf(GroupKind kind, const char* what) {
  for (GroupState& group : groups_) {
    if (group.spec.kind == kind) return group;
  }
  ThrowError("kv-canary: ", what, ": no buffer group ", GroupKindName(kind), " is installed");
}

const GroupState& CanaryManager::Impl::GroupOf(GroupKind kind, const char* what) const {
  return const_cast<Impl*>(this)->GroupOf(kind, what);
}

void CanaryManager::BackupRecords(GroupKind kind, const std::vector<int64_t>& host_indices,
                                  const std::vector<int64_t>& device_indices,
                                  const HostLayer0& host_layer0) {
  GroupState& group = impl_->GroupOf(kind, "backup");
  if (group.host_slots <= 0) {
    ThrowError("kv-canary: missing HiCache host size for ", GroupKindName(kind));
  }
  CheckIndexPairs(host_indices, device_indices, group.host_slots, group.spec.num_slots, "backup");
  std::array<std::optional<RealKvSource>, 2> verify_sources;
  if (impl_->config_.verify_backup && !host_indices.empty()) {
    verify_sources = impl_->BackupSources(group, host_layer0);
  }
  CopyRecords(group, CopyDirection::kToHost, host_indices, device_indices, impl_->device_,
              impl_->stream_);
  if (impl_->config_.verify_backup) impl_->VerifyBackup(group, host_indices, verify_sources);
}

void CanaryManager::RestoreRecords(GroupKind kind, const std::vector<int64_t>& host_indices,
                                   const std::vector<int64_t>& device_indices) {
  GroupState& group = impl_->GroupOf(kind, "restore");
  if (group.host_slots <= 0) {
    ThrowError("kv-canary: missing HiCache host size for ", GroupKindName(kind));
  }
  CheckIndexPairs(host_indices, device_indices, group.host_slots, group.spec.num_slots,
                  "restore");
  CopyRecords(group, CopyDirection::kToDevice, host_indices, device_indices, impl_->device_,
              impl_->stream_);
}

std::vector<CanaryManager::BufferInfo> CanaryManager::TransferBuffers(GroupKind kind,
                                                                      int64_t page_size) const {
  const GroupState& group = impl_->GroupOf(kind, "transfer");
  std::vector<BufferInfo> list;
  // Splice order: k_head, k_tail, v_head, v_tail.
  for (int b : {0, 2, 1, 3}) {
    if (group.buffers[b].data() == nullptr) continue;
    list.push_back(BufferInfo{group.buffers[b].data(), group.buffers[b].bytes(),
                              CheckedMul("transfer page bytes", kCanarySlotBytes, page_size)});
  }
  return list;
}

void CanaryManager::SpliceBufInfo(GroupKind kind, std::vector<BufferInfo>& kv_list,
                                  int64_t page_size) const {
  const std::vector<BufferInfo> canary = TransferBuffers(kind, page_size);
  const GroupState& group = impl_->GroupOf(kind, "splice");
  if (!group.has_v) {
    kv_list.insert(kv_list.begin(), canary[0]);
    kv_list.push_back(canary[1]);
    return;
  }
  if (kv_list.size() % 2 != 0) {
    ThrowError("kv-canary: K/V split adapter expects even-length buf_info list, got ",
               kv_list.size());
  }
  const size_t half = kv_list.size() / 2;
  std::vector<BufferInfo> spliced;
  spliced.push_back(canary[0]);
  spliced.insert(spliced.end(), kv_list.begin(), kv_list.begin() + half);
  spliced.push_back(canary[1]);
  spliced.push_back(canary[2]);
  spliced.insert(spliced.end(), kv_list.begin() + half, kv_list.end());
  spliced.push_back(canary[3]);
  kv_list = std::move(spliced);
}

}  // namespace kvcanary::runtime
