// Host offload sidecar and PD splice (spec/runtime.md §13, §14): canary records move with the KV
// bytes they describe, with the same index mapping, so reloaded or transferred slots verify.
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

}  // namespace

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
                                  const std::vector<int64_t>& device_indices) {
  GroupState& group = impl_->GroupOf(kind, "backup");
  if (group.host_slots <= 0) {
    ThrowError("kv-canary: missing HiCache host size for ", GroupKindName(kind));
  }
  CheckIndexPairs(host_indices, device_indices, group.host_slots, group.spec.num_slots, "backup");
  for (int b = 0; b < 4; ++b) {
    if (group.buffers[b].data() == nullptr) continue;
    for (size_t i = 0; i < host_indices.size(); ++i) {
      CopyBytesAsync(group.host_mirrors[b].data_as<char>() + kCanarySlotBytes * host_indices[i],
                     group.buffers[b].data_as<char>() + kCanarySlotBytes * device_indices[i],
                     kCanarySlotBytes, impl_->device_, impl_->stream_);
    }
  }
}

void CanaryManager::RestoreRecords(GroupKind kind, const std::vector<int64_t>& host_indices,
                                   const std::vector<int64_t>& device_indices) {
  GroupState& group = impl_->GroupOf(kind, "restore");
  if (group.host_slots <= 0) {
    ThrowError("kv-canary: missing HiCache host size for ", GroupKindName(kind));
  }
  CheckIndexPairs(host_indices, device_indices, group.host_slots, group.spec.num_slots,
                  "restore");
  for (int b = 0; b < 4; ++b) {
    if (group.buffers[b].data() == nullptr) continue;
    for (size_t i = 0; i < host_indices.size(); ++i) {
      CopyBytesAsync(group.buffers[b].data_as<char>() + kCanarySlotBytes * device_indices[i],
                     group.host_mirrors[b].data_as<char>() + kCanarySlotBytes * host_indices[i],
                     kCanarySlotBytes, impl_->device_, impl_->stream_);
    }
  }
}

std::vector<CanaryManager::BufferInfo> CanaryManager::TransferBuffers(GroupKind kind,
                                                                      int64_t page_size) const {
  const GroupState& group = impl_->GroupOf(kind, "transfer");
  std::vector<BufferInfo> list;
  // Splice order: k_head, k_tail, v_head, v_tail.
  for (int b : {0, 2, 1, 3}) {
    if (group.buffers[b].data() == nullptr) continue;
    list.push_back(BufferInfo{group.buffers[b].data(), group.spec.num_slots * kCanarySlotBytes,
                              kCanarySlotBytes * page_size});
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
