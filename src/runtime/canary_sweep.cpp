// Periodic sweep: re-verifies the TAIL records of every cached prefix, which
// catches corruption of slots that no running request reads. Runs eagerly in phase 4, through
// the sweep plan (inner forward 0's, free by then, unless verify is fused), in chunks of the
// verify capacity: never dropped. VerifyRecordsNow runs the same verification of an engine's
// own walk (a finished request's slots) between steps.
#include <algorithm>
#include <string>

#include "kvcanary/error.h"

#include "runtime/canary_impl.h"
#include "runtime/compressed_pool.h"

namespace kvcanary::runtime {

void CanaryManager::Impl::MaybeSweep() {
  const int64_t interval = config_.sweep_interval;
  if (interval <= 0) return;
  const int64_t step = step_.outer;
  if (sweep_.last_step >= 0 && step - sweep_.last_step < interval) return;
  sweep_.last_step = step;
  if (sweep_.radix == nullptr) return;

  VerifyWalk(WalkRadix(*sweep_.radix, /*unlocked_only=*/false, /*swa_resident_only=*/false,
                       table_.max_seq_len));
  sweep_.passes += 1;
  health_.sweep_since_stage = true;
  Log(LogLevel::kInfo, FormatSweepLine(sweep_.passes, step));
}

void CanaryManager::Impl::VerifyWalk(const RadixWalk& walk) {
  const int64_t capacity = capacities_.verify_capacity;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const VerifyPlanView& plan = sweep_.plans[g];
    // At least one launch, even for an empty cache: the health checker expects SWEEP counters
    // to move after every pass.
    for (int64_t begin = 0; begin == 0 || begin < walk.size(); begin += capacity) {
      const int64_t n = std::min(capacity, walk.size() - begin);
      const std::vector<int64_t> no_token(n, -1);
      CopyBytesAsync(plan.verify_slot_indices.data(), walk.slot_indices.data() + begin, 8 * n,
                     device_, stream_);
      CopyBytesAsync(plan.verify_prev_slot_indices.data(), walk.prev_slot_indices.data() + begin,
                     8 * n, device_, stream_);
      CopyBytesAsync(plan.verify_expected_positions.data(), walk.positions.data() + begin, 8 * n,
                     device_, stream_);
      CopyBytesAsync(plan.verify_expected_tokens.data(), no_token.data(), 8 * n, device_, stream_);
      const int32_t header[2] = {static_cast<int32_t>(n), 1};  // num_valid, enable
      CopyBytesAsync(plan.verify_num_valid.data(), &header[0], 4, device_, stream_);
      CopyBytesAsync(plan.enable.data(), &header[1], 4, device_, stream_);
      if (SlotTable(groups_[g].spec).defined()) {
        // The walk holds full-pool slots; SWA and compressed records live in their own slots.
        for (const TensorView& slots : {plan.verify_slot_indices, plan.verify_prev_slot_indices}) {
          SwaTranslateArgs translate;
          translate.slot_indices = TensorView(slots.data(), DType::kInt64, device_, {n});
          translate.full_to_swa_index_mapping = SlotTable(groups_[g].spec);
          translate.out_slot_indices = translate.slot_indices;
          SwaTranslate(translate, stream_);
        }
      }
      VerifyGroup(g, Stage::kSweep, plan, /*check_token=*/false);
      // The host arrays above must outlive the copies that read them.
      SynchronizeStream(device_, stream_);
    }
  }
}

void CanaryManager::Impl::VerifyRecordsNow(const RadixWalk& records) {
  if (step_.in_step) {
    ThrowError("kv-canary: verify_records_now called inside a step (between begin_step and "
               "end_step); call it between steps");
  }
  const size_t n = records.slot_indices.size();
  if (records.positions.size() != n || records.prev_slot_indices.size() != n) {
    ThrowError("kv-canary: verify_records_now: slot_indices, positions and prev_slot_indices "
               "must have one length, got ",
               n, ", ", records.positions.size(), " and ", records.prev_slot_indices.size());
  }
  const int64_t slots = args_.pool_slot_count;
  for (size_t i = 0; i < n; ++i) {
    const int64_t slot = records.slot_indices[i];
    const int64_t prev = records.prev_slot_indices[i];
    if (slot < 0 || slot >= slots) {
      ThrowError("kv-canary: verify_records_now: slot_indices[", i, "] must be in [0, ", slots,
                 "), got ", slot);
    }
    if (prev < -1 || prev >= slots) {
      ThrowError("kv-canary: verify_records_now: prev_slot_indices[", i, "] must be in [-1, ",
                 slots, "), got ", prev);
    }
    if (records.positions[i] < 0) {
      ThrowError("kv-canary: verify_records_now: positions[", i, "] must be >= 0, got ",
                 records.positions[i]);
    }
  }
  if (n == 0) return;
  VerifyWalk(records);
}

}  // namespace kvcanary::runtime
