// What a verify or write launch needs besides its plan: the canary buffer, the launch tag, the
// shared violation ring and counters, and the real-KV sources.
#pragma once

#include <array>
#include <cstdint>

#include "kvcanary/format.h"
#include "kvcanary/tensor.h"

namespace kvcanary {

// A live view of one KV tensor whose bytes are fingerprinted. For slot s the strip starts at
// byte (s % page_size) * num_bytes_per_token of row s / page_size of the tensor viewed as a 2-D
// byte matrix, and is num_bytes_per_token long.
//
// A source may span layers (a kvcanary addition): layer_addresses, [num_layers] int64 on the
// tensor's device, holds the base address of each layer, every one laid out like `tensor` (its
// shape and strides; `tensor` itself is usually layer 0). The slot's strip of each layer is folded
// in that order and combined like a source of its own, so the hash equals that of num_layers
// single-layer sources. The addresses are read like tensor's data pointer: trusted, not checked.
struct RealKvSource {
  TensorView tensor;  // >= 2-D, rows 16-byte aligned; viewed as uint8 [rows, dim1_bytes]
  int64_t page_size = 0;
  int64_t num_bytes_per_token = 0;
  int64_t read_bytes = 0;  // bytes folded in ALL mode; PARTIAL always folds 16
  TensorView layer_addresses;  // absent: `tensor` alone; else [1, kMaxRealKvLayers] int64
};

// The number of layers a source folds: layer_addresses' length, or 1.
int64_t NumLayers(const RealKvSource& source);

// Builds a source, checking R1-R7. Ops re-check every source they are given, so a
// hand-built struct is as safe as one made here.
RealKvSource MakeRealKvSource(const TensorView& tensor, int64_t page_size,
                              int64_t num_bytes_per_token, int64_t read_bytes);
// Throws the R1-R7 error of the first failing check.
void ValidateRealKvSource(const RealKvSource& source);

// The launch context shared by verify and write (SGLang's VerifyOrWriteContext).
struct LaunchContext {
  TensorView canary_buf;             // [num_slots, slot_stride_bytes >= 32] uint8 records
  int64_t kernel_kind = 0;           // CanaryLaunchTag stamped into column 0 of each row
  TensorView violation_ring;         // [ring_capacity, 8] int64 fill-once rows
  TensorView violation_write_index;  // [1] int32 violations ever recorded
  TensorView slot_run_counter;       // [1] int64 entries processed
  TensorView kernel_run_counter;     // [1] int64 launches
  std::array<RealKvSource, kMaxRealKvSources> real_kv_sources{};
  int num_real_kv_sources = 0;       // the first n of real_kv_sources are used
  int32_t real_kv_hash_mode = 0;     // a RealKvHashMode value
  TensorView enable_chain_position_assert;  // [1] int32, write only: assert on iff != 0
};

// The fingerprint of slot `slot` over the first `num_sources` sources, read now on the host.
// REQUIRES: CPU tensors. Validates the sources and the mode like an op does.
uint64_t RealKvHash(const RealKvSource* sources, int num_sources, int32_t real_kv_hash_mode,
                    int64_t slot);

// slot_hash(buf, slot) (docs/format.md), read now on the host: the chain head hash for slot < 0.
// REQUIRES: canary_buf a CPU uint8 [N, >= 32] tensor and slot < N.
uint64_t ComputeSlotHash(const TensorView& canary_buf, int64_t slot);

}  // namespace kvcanary
