// The simulator's KV pool: per layer a K and a V tensor [num_slots, bytes_per_token] of real bytes,
// on the host or on a CUDA device, as an engine's MHA token-to-KV pool holds them.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "kvcanary/tensor.h"

namespace kvcanary::sim {

// Slot 0 is the padding slot: engines point unused req_to_token entries at it, so nothing real
// is ever stored there (the allocator never hands it out).
inline constexpr int64_t kPaddingSlot = 0;

// Thread safety: none; the simulator drives it from one thread.
//
// Invariants: on the CPU the host rows ARE the buffers. On CUDA every write made through this
// class goes to the device (ordered on `stream`) and to the host mirror, so the mirror equals the
// device as long as nothing else writes the buffers; FetchToHost() re-reads the device when
// something might have (the canary never writes KV, but a test or a fault may write the device
// directly).
class KvPool {
 public:
  // REQUIRES: num_slots >= 2, num_layers >= 1, bytes_per_token a positive multiple of 16 (the
  // real-data strip and the oracle's 8-byte words). Throws kvcanary::Error otherwise. `stream`
  // must outlive the pool.
  KvPool(Device device, int64_t num_slots, int num_layers, int64_t bytes_per_token,
         StreamHandle stream);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  Device device() const { return device_; }
  StreamHandle stream() const { return stream_; }
  int64_t num_slots() const { return num_slots_; }
  int num_layers() const { return num_layers_; }
  int64_t bytes_per_token() const { return bytes_per_token_; }
  // Bytes of one slot across all layers, K and V: the unit of ReadSlotToHost/WriteSlotFromHost.
  int64_t SlotBytes() const { return 2 * num_layers_ * bytes_per_token_; }

  // uint8 [num_slots, bytes_per_token] view of the device buffer of `layer`, half `kv` (0 = K).
  TensorView Layer(int layer, int kv) const;

  // Writes FillKvBytes(token, position, l, kv) into every layer's K and V row of `slot`.
  void WriteToken(int64_t slot, int64_t token, int64_t position);

  // CUDA: copies every layer's device buffers into the host mirror and waits. CPU: nothing.
  void FetchToHost();

  // The host copy of one row (bytes_per_token bytes); valid until the pool is destroyed. On CUDA
  // it is as fresh as the last write through this class or FetchToHost().
  const uint8_t* HostRow(int layer, int kv, int64_t slot) const;
  // The host base of one [num_slots, bytes_per_token] tensor (row r at r * bytes_per_token).
  const uint8_t* HostTable(int layer, int kv) const;

  // XORs one byte of a row with 0xFF on the device and in the mirror (fault injection). CUDA:
  // synchronous (reads the device byte first, so it flips what the device holds).
  void FlipByte(int layer, int kv, int64_t slot, int64_t byte_index);

  // Copies every layer's K and V row of `src` to `dst` (device to device, and in the mirror).
  void CopySlot(int64_t dst, int64_t src);

  // The host tier's and PD transfer's unit: all layers of one slot, layer-major, K before V
  // (SlotBytes() bytes). ReadSlotToHost resizes `out` and, on CUDA, waits for the copy.
  void ReadSlotToHost(int64_t slot, std::vector<uint8_t>& out) const;
  // REQUIRES: in.size() == SlotBytes().
  void WriteSlotFromHost(int64_t slot, const std::vector<uint8_t>& in);

  // Sets every layer's K and V row of `slot` to zero.
  void ZeroSlot(int64_t slot);

 private:
  int Index(int layer, int kv) const { return 2 * layer + kv; }
  uint8_t* DeviceRow(int layer, int kv, int64_t slot) const;
  uint8_t* MutableHostRow(int layer, int kv, int64_t slot);
  void CheckSlot(int64_t slot) const;
  bool on_cuda() const { return device_.type == DeviceType::kCUDA; }

  Device device_;
  int64_t num_slots_;
  int num_layers_;
  int64_t bytes_per_token_;
  StreamHandle stream_;
  // [2 * layer + kv]: the device tensors, and on CUDA their host mirrors (empty on the CPU).
  std::vector<runtime::DeviceBuffer> buffers_;
  std::vector<std::vector<uint8_t>> mirrors_;
};

}  // namespace kvcanary::sim
