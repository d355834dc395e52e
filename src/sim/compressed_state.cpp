#include "sim/compressed_state.h"

#include <algorithm>

#include "kvcanary/checked.h"
#include "sim/kv_bytes.h"

namespace kvcanary::sim {

CompressedState::CompressedState(Device device, int64_t full_slots, int64_t ratio,
                                 int64_t bytes_per_token, StreamHandle stream)
    : device_(device),
      stream_(stream),
      full_slots_(full_slots),
      ratio_(ratio),
      slots_(full_slots / ratio + 1),
      bytes_per_token_(bytes_per_token),
      table_(full_slots + 1, 0),
      bytes_(CheckedMul("compressed pool bytes", slots_, bytes_per_token), 0),
      table_device_(device, CheckedMul("compressed table bytes", full_slots + 1, 8)),
      bytes_device_(device, static_cast<int64_t>(bytes_.size())) {
  for (int64_t slot = 1; slot <= full_slots; ++slot) table_[slot] = ClosedBy(slot);
  runtime::CopyBytesAsync(table_device_.data(), table_.data(), 8 * (full_slots + 1), device,
                          stream);
  runtime::SynchronizeStream(device, stream);
}

void CompressedState::Describe(runtime::GroupSpec& full) const {
  full.compress_ratio = ratio_;
  full.full_to_compressed = table_device_.View(DType::kInt64, {full_slots_ + 1});
  full.num_slots = slots_;
  full.k_layer0 = bytes_device_.View(DType::kUInt8, {slots_, bytes_per_token_});
  full.v_layer0 = TensorView();
  full.k_layers.clear();
  full.v_layers.clear();
  full.bytes_per_token = bytes_per_token_;
  full.host_slots = 0;
}

int64_t CompressedState::ClosedBy(int64_t full_slot) const {
  return full_slot > 0 && (full_slot + 1) % ratio_ == 0 ? full_slot / ratio_ : 0;
}

void CompressedState::Write(int64_t full_slot, int64_t token, int64_t position) {
  const int64_t slot = ClosedBy(full_slot);
  if (slot == 0) return;
  uint8_t* host = bytes_.data() + slot * bytes_per_token_;
  FillKvBytes(token, position, 0, kKeyHalf, host, bytes_per_token_);
  runtime::CopyBytesAsync(bytes_device_.data_as<uint8_t>() + slot * bytes_per_token_, host,
                          bytes_per_token_, device_, stream_);
}

void CompressedState::SetEntry(int64_t full_slot, int64_t compressed_slot) {
  table_[full_slot] = compressed_slot;
  if (compressed_slot == ClosedBy(full_slot)) {
    edited_.erase(full_slot);
  } else {
    edited_.insert(full_slot);
  }
  runtime::CopyBytesAsync(table_device_.data_as<int64_t>() + full_slot, &table_[full_slot], 8,
                          device_, stream_);
  runtime::SynchronizeStream(device_, stream_);
}

std::vector<int64_t> CompressedState::FullSlotsNaming(int64_t compressed_slot) const {
  std::vector<int64_t> full;
  if (compressed_slot <= 0) return full;
  // As built, only slot c * R + R - 1 names c (ClosedBy); every other naming entry was edited.
  // That slot names c only while unedited, so it is never also among the edited ones.
  for (int64_t slot : edited_) {
    if (table_[slot] == compressed_slot) full.push_back(slot);  // ascending
  }
  const int64_t built = compressed_slot < slots_ ? compressed_slot * ratio_ + ratio_ - 1 : 0;
  if (built > 0 && built <= full_slots_ && table_[built] == compressed_slot) {
    full.insert(std::lower_bound(full.begin(), full.end(), built), built);
  }
  return full;
}

}  // namespace kvcanary::sim
