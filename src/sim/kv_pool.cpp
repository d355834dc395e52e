#include "sim/kv_pool.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "sim/kv_bytes.h"

namespace kvcanary::sim {

using runtime::CopyBytesAsync;
using runtime::DeviceBuffer;
using runtime::SynchronizeStream;
using runtime::ZeroBytesAsync;

KvPool::KvPool(Device device, int64_t num_slots, int num_layers, int64_t bytes_per_token,
               StreamHandle stream)
    : device_(device),
      num_slots_(num_slots),
      num_layers_(num_layers),
      bytes_per_token_(bytes_per_token),
      stream_(stream) {
  if (num_slots < 2) ThrowError("kv-canary sim: num_slots: expected >= 2, got ", num_slots);
  if (num_layers < 1) ThrowError("kv-canary sim: num_layers: expected >= 1, got ", num_layers);
  if (bytes_per_token <= 0 || bytes_per_token % 16 != 0) {
    ThrowError("kv-canary sim: bytes_per_token: expected a positive multiple of 16, got ",
               bytes_per_token);
  }
  // Checked before anything is allocated: a wrapped product would size small buffers that every
  // row access then runs past. SlotBytes() is checked here once for every later use.
  const int64_t bytes =
      CheckedMul("KvPool num_slots x bytes_per_token", num_slots, bytes_per_token);
  CheckedMul("KvPool slot bytes (2 x num_layers x bytes_per_token)", 2, num_layers,
             bytes_per_token);
  for (int i = 0; i < 2 * num_layers; ++i) {
    buffers_.emplace_back(device, bytes);
    // The mirror starts zero like the device buffer, so the two agree from the start.
    if (on_cuda()) mirrors_.emplace_back(static_cast<size_t>(bytes), uint8_t{0});
  }
}

void KvPool::CheckSlot(int64_t slot) const {
  if (slot < 0 || slot >= num_slots_) {
    throw std::out_of_range("kv-canary sim: slot " + std::to_string(slot) +
                            " outside the pool of " + std::to_string(num_slots_) + " slots");
  }
}

TensorView KvPool::Layer(int layer, int kv) const {
  return buffers_.at(Index(layer, kv)).View(DType::kUInt8, {num_slots_, bytes_per_token_});
}

uint8_t* KvPool::DeviceRow(int layer, int kv, int64_t slot) const {
  return buffers_.at(Index(layer, kv)).data_as<uint8_t>() + slot * bytes_per_token_;
}

uint8_t* KvPool::MutableHostRow(int layer, int kv, int64_t slot) {
  if (!on_cuda()) return DeviceRow(layer, kv, slot);
  return mirrors_.at(Index(layer, kv)).data() + slot * bytes_per_token_;
}

const uint8_t* KvPool::HostRow(int layer, int kv, int64_t slot) const {
  CheckSlot(slot);
  return HostTable(layer, kv) + slot * bytes_per_token_;
}

const uint8_t* KvPool::HostTable(int layer, int kv) const {
  if (!on_cuda()) return buffers_.at(Index(layer, kv)).data_as<uint8_t>();
  return mirrors_.at(Index(layer, kv)).data();
}

void KvPool::WriteToken(int64_t slot, int64_t token, int64_t position) {
  CheckSlot(slot);
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      uint8_t* host = MutableHostRow(layer, kv, slot);
      FillKvBytes(token, position, layer, kv, host, bytes_per_token_);
      // From pageable memory the copy is staged before CopyBytesAsync returns, so the mirror
      // may change afterwards without racing the device.
      if (on_cuda()) {
        CopyBytesAsync(DeviceRow(layer, kv, slot), host, bytes_per_token_, device_, stream_);
      }
    }
  }
}

void KvPool::FetchToHost() {
  if (!on_cuda()) return;
  for (int i = 0; i < 2 * num_layers_; ++i) {
    CopyBytesAsync(mirrors_[i].data(), buffers_[i].data(), num_slots_ * bytes_per_token_, device_,
                   stream_);
  }
  SynchronizeStream(device_, stream_);
}

void KvPool::FlipByte(int layer, int kv, int64_t slot, int64_t byte_index) {
  CheckSlot(slot);
  if (byte_index < 0 || byte_index >= bytes_per_token_) {
    throw std::out_of_range("kv-canary sim: byte " + std::to_string(byte_index) +
                            " outside a row of " + std::to_string(bytes_per_token_) + " bytes");
  }
  uint8_t* host = MutableHostRow(layer, kv, slot) + byte_index;
  if (!on_cuda()) {
    *host ^= 0xFF;
    return;
  }
  // Flip what the device holds, not what the mirror last saw: the two differ if a fault wrote
  // the device behind the pool's back.
  uint8_t* device = DeviceRow(layer, kv, slot) + byte_index;
  uint8_t value = 0;
  CopyBytesAsync(&value, device, 1, device_, stream_);
  SynchronizeStream(device_, stream_);
  value ^= 0xFF;
  *host = value;
  CopyBytesAsync(device, host, 1, device_, stream_);
  SynchronizeStream(device_, stream_);
}

void KvPool::CopySlot(int64_t dst, int64_t src) {
  CheckSlot(dst);
  CheckSlot(src);
  if (dst == src) return;
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      CopyBytesAsync(DeviceRow(layer, kv, dst), DeviceRow(layer, kv, src), bytes_per_token_,
                     device_, stream_);
      if (on_cuda()) {
        std::memcpy(MutableHostRow(layer, kv, dst), MutableHostRow(layer, kv, src),
                    static_cast<size_t>(bytes_per_token_));
      }
    }
  }
}

void KvPool::ReadSlotToHost(int64_t slot, std::vector<uint8_t>& out) const {
  CheckSlot(slot);
  out.resize(static_cast<size_t>(SlotBytes()));
  uint8_t* cursor = out.data();
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      CopyBytesAsync(cursor, DeviceRow(layer, kv, slot), bytes_per_token_, device_, stream_);
      cursor += bytes_per_token_;
    }
  }
  SynchronizeStream(device_, stream_);
}

void KvPool::WriteSlotFromHost(int64_t slot, const std::vector<uint8_t>& in) {
  CheckSlot(slot);
  if (static_cast<int64_t>(in.size()) != SlotBytes()) {
    throw std::invalid_argument("kv-canary sim: WriteSlotFromHost: expected " +
                                std::to_string(SlotBytes()) + " bytes, got " +
                                std::to_string(in.size()));
  }
  const uint8_t* cursor = in.data();
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      CopyBytesAsync(DeviceRow(layer, kv, slot), cursor, bytes_per_token_, device_, stream_);
      if (on_cuda()) {
        std::memcpy(MutableHostRow(layer, kv, slot), cursor, static_cast<size_t>(bytes_per_token_));
      }
      cursor += bytes_per_token_;
    }
  }
}

void KvPool::ZeroSlot(int64_t slot) {
  CheckSlot(slot);
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      ZeroBytesAsync(DeviceRow(layer, kv, slot), bytes_per_token_, device_, stream_);
      if (on_cuda()) {
        std::memset(MutableHostRow(layer, kv, slot), 0, static_cast<size_t>(bytes_per_token_));
      }
    }
  }
}

}  // namespace kvcanary::sim
