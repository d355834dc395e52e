// The state one bench run shares across its cases, allocated once and sized by the suite: the
// req_to_token table, the four canary buffers of one MHA FULL group (k_head, v_head, k_tail,
// v_tail), the K and V tensors the TAIL launches fingerprint, and the
// violation ring with per-tag counters.
//
// Memory, suite standard: req_to_token 4096 x 32768 int32 = 512 MiB, block table 32 MiB; canary
// buffers 4 x 64 MB; K and V 2 x 512 MB (256 bytes per slot), times fingerprint_layers. Suite
// quick: 1/16 of the slots, 1/256 of the table.
//
// Thread safety: none; one bench runs its launches one after another.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "bench/cases.h"
#include "bench/device.h"
#include "bench/device_tensor.h"
#include "kvcanary/kvcanary.h"

namespace kvcanary::bench {

// The four launches of one step that own a canary buffer here, in step order per endpoint.
inline constexpr CanaryLaunchTag kStepTags[] = {
    CanaryLaunchTag::kHeadKFull, CanaryLaunchTag::kHeadVFull, CanaryLaunchTag::kTailKFull,
    CanaryLaunchTag::kTailVFull};

class Pool {
 public:
  // Fills req_to_token with row-aligned pages of random permutations of [1, num_slots), so each
  // row holds distinct slots, the K and V tensors with random bytes, and zeroes the rest.
  Pool(BenchDevice& device, const Suite& suite, uint64_t seed);

  BenchDevice& device() const { return *device_; }
  const Suite& suite() const { return suite_; }
  const DeviceTensor& req_to_token() const { return req_to_token_; }
  // The paged cases' table: int32 block ids [req_to_token rows, block_table_cols()], blocks of
  // kPagedBlockSize tokens, zero until a case stores its rows.
  const DeviceTensor& block_table() const { return block_table_; }
  int64_t block_table_cols() const { return suite_.req_to_token_cols / kPagedBlockSize; }
  // REQUIRES: tag is one of kStepTags.
  const DeviceTensor& canary(CanaryLaunchTag tag) const;
  // Layer 0 of the K (half 0) or V (half 1) tensor the TAIL launches fingerprint.
  const DeviceTensor& kv(int half) const { return kv_.at(static_cast<size_t>(half)); }

  // The context of one of kStepTags. TAIL launches fingerprint their half's KV tensor in
  // kPartial mode; HEAD launches never do (the forward has not written KV yet,
  // so HEAD records carry real_kv_hash 0).
  LaunchContext Context(CanaryLaunchTag tag, RealData mode) const;
  // The layers a launch of `tag` folds per slot: the suite's fingerprint_layers for TAIL under
  // kPartial, else 0.
  int FoldedLayers(CanaryLaunchTag tag, RealData mode) const;

  int32_t ViolationCount() const;
  // The first recorded row. REQUIRES: ViolationCount() > 0.
  std::array<int64_t, kViolationFields> FirstViolation() const;
  // Rewinds the fill-once ring, so a probe that records a violation on purpose leaves later
  // checks meaningful.
  void ResetViolations();
  int64_t SlotRunCount(CanaryLaunchTag tag) const;
  int64_t KernelRunCount(CanaryLaunchTag tag) const;

 private:
  BenchDevice* device_;
  Suite suite_;
  DeviceTensor req_to_token_;
  DeviceTensor block_table_;
  std::array<DeviceTensor, 4> canary_;  // indexed by the tag's value (0..3)
  std::array<DeviceTensor, 2> kv_;      // K, V: bf16 [num_slots, bytes per token / 2]
  // K, V: layers 1 .. fingerprint_layers - 1, laid out like kv_, and the int64 table of every
  // layer's address (layer 0 is kv_); empty with one layer.
  std::array<std::vector<DeviceTensor>, 2> deep_kv_;
  std::array<DeviceTensor, 2> layer_tables_;
  DeviceTensor ring_;
  DeviceTensor write_index_;
  DeviceTensor slot_run_counters_;    // int64 [kNumLaunchTags]
  DeviceTensor kernel_run_counters_;  // int64 [kNumLaunchTags]
  DeviceTensor chain_assert_;         // int32 [1] = 0, as the runtime keeps it under graphs
};

// Sets every byte of `tensor` to zero.
void ZeroFill(const DeviceTensor& tensor);

}  // namespace kvcanary::bench
