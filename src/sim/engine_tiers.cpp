// The engine's memory tiers beside the main pool: the host tier (offload and restore of radix
// nodes, with their canary records) and the sliding-window layers' share of the model, plus the
// repairs the fault injector's quarantine uses.
#include <algorithm>

#include "kvcanary/hash.h"
#include "sim/engine.h"
#include "sim/kv_bytes.h"

namespace kvcanary::sim {

std::vector<int64_t> Engine::BackupToHost(const std::vector<int64_t>& device_slots) {
  if (l3_) return BackupToTier(device_slots);
  if (host_free_.size() < device_slots.size()) return {};  // host tier full: drop the node
  return CopyToHost(device_slots);
}

std::vector<int64_t> Engine::CopyToHost(const std::vector<int64_t>& device_slots) {
  std::vector<int64_t> host_slots;
  for (int64_t device_slot : device_slots) {
    const int64_t host_slot = host_free_.back();
    host_free_.pop_back();
    pool_->ReadSlotToHost(device_slot, host_kv_[host_slot]);
    host_contents_[host_slot] = slot_contents_[device_slot];
    host_slots.push_back(host_slot);
  }
  // The records travel with the KV, under the same mapping (the offload sidecar).
  if (canary_) canary_->BackupRecords(runtime::GroupKind::kFull, host_slots, device_slots);
  return host_slots;
}

void Engine::RestoreFromHost(const std::vector<int64_t>& host_slots,
                             const std::vector<int64_t>& device_slots) {
  if (l3_) {
    RestoreFromTier(host_slots, device_slots);
  } else {
    CopyFromHost(host_slots, device_slots);
  }
}

void Engine::CopyFromHost(const std::vector<int64_t>& host_slots,
                          const std::vector<int64_t>& device_slots) {
  for (size_t i = 0; i < host_slots.size(); ++i) {
    pool_->WriteSlotFromHost(device_slots[i], host_kv_[host_slots[i]]);
    slot_contents_[device_slots[i]] = host_contents_[host_slots[i]];
  }
  std::vector<int64_t> record_slots = host_slots;
  if (hooks_ != nullptr) hooks_->OnRestore(*this, record_slots, device_slots);
  if (canary_) canary_->RestoreRecords(runtime::GroupKind::kFull, record_slots, device_slots);
  for (int64_t host_slot : host_slots) host_free_.push_back(host_slot);
}

void Engine::SwapCanaryRecords(int64_t a, int64_t b) {
  if (!canary_) return;
  const std::vector<uint8_t> records_a = ReadCanaryRecords(a);
  WriteCanaryRecords(a, ReadCanaryRecords(b));
  WriteCanaryRecords(b, records_a);
}

std::vector<uint8_t> Engine::ReadCanaryRecords(int64_t slot) {
  std::vector<uint8_t> records(4 * 32);
  if (!canary_) return records;
  uint8_t* cursor = records.data();
  for (bool tail : {false, true}) {
    for (bool v_half : {false, true}) {
      const TensorView buffer = canary_->CanaryBuffer(runtime::GroupKind::kFull, tail, v_half);
      runtime::CopyBytesAsync(cursor, buffer.data_as<char>() + 32 * slot, 32, device_,
                              stream_->handle());
      cursor += 32;
    }
  }
  runtime::SynchronizeStream(device_, stream_->handle());
  return records;
}

void Engine::WriteCanaryRecords(int64_t slot, const std::vector<uint8_t>& records) {
  if (!canary_) return;
  const uint8_t* cursor = records.data();
  for (bool tail : {false, true}) {
    for (bool v_half : {false, true}) {
      const TensorView buffer = canary_->CanaryBuffer(runtime::GroupKind::kFull, tail, v_half);
      runtime::CopyBytesAsync(buffer.data_as<char>() + 32 * slot, cursor, 32, device_,
                              stream_->handle());
      cursor += 32;
    }
  }
  runtime::SynchronizeStream(device_, stream_->handle());
}

void Engine::RepairKv(std::pair<int64_t, int64_t> content) {
  for (int64_t slot = 1; slot < options_.num_slots; ++slot) {
    if (slot_contents_[slot] == content) RestoreSlotKv(slot);
  }
  const int64_t bytes = options_.bytes_per_token;
  for (size_t h = 0; h < host_kv_.size(); ++h) {
    if (host_contents_[h] != content || host_kv_[h].empty()) continue;
    uint8_t* cursor = host_kv_[h].data();  // ReadSlotToHost's layout: layer-major, K then V
    for (int layer = 0; layer < options_.num_layers; ++layer) {
      for (int kv = 0; kv < 2; ++kv, cursor += bytes) {
        FillKvBytes(content.first, content.second, layer, kv, cursor, bytes);
      }
    }
  }
}

void Engine::RestoreSlotKv(int64_t slot) {
  const auto [token, position] = slot_contents_.at(slot);
  pool_->WriteToken(slot, token, position);
}

uint64_t Engine::SwaHash(const int32_t* slot_row, int64_t seq_len, int64_t query) const {
  const int64_t start = std::max<int64_t>(0, seq_len - options_.swa_window);
  std::vector<int32_t> swa_row(seq_len - start);
  for (int64_t pos = start; pos < seq_len; ++pos) {
    const int64_t full = slot_row[pos];
    const bool mapped = full >= 0 && full < options_.num_slots;
    swa_row[pos - start] = mapped ? static_cast<int32_t>(swa_->SwaSlotOf(full)) : 0;
  }
  return oracle_.HashFromPool(swa_->pool(), swa_row.data(), seq_len - start, query);
}

uint64_t Engine::ExpectedSwaHash(const Request& req, int64_t seq_len, int64_t query) const {
  const int64_t start = std::max<int64_t>(0, seq_len - options_.swa_window);
  const int64_t bytes = options_.bytes_per_token;
  const int layers = static_cast<int>(options_.num_layers);
  std::vector<uint8_t> rows((seq_len - start) * layers * 2 * bytes);
  for (int64_t pos = start; pos < seq_len; ++pos) {
    for (int layer = 0; layer < layers; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        FillKvBytes(req.tokens[pos], pos, layer, kv,
                    &rows[(((pos - start) * layers + layer) * 2 + kv) * bytes], bytes);
      }
    }
  }
  const OracleModel::KvReader read = [&](int layer, int kv, int64_t j) -> const uint8_t* {
    return &rows[((j * layers + layer) * 2 + kv) * bytes];
  };
  return oracle_.Hash(read, seq_len - start, query);
}

}  // namespace kvcanary::sim
