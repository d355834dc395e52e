// Output checks around the timed loops.
#include "bench/checks.h"

#include <array>
#include <cstring>
#include <sstream>

namespace kvcanary::bench {
namespace {

using Record = std::array<int64_t, kCanaryFieldsPerSlot>;

class Checker {
 public:
  explicit Checker(std::string where) : where_(std::move(where)) {}

  void Expect(bool ok, const std::string& what, int64_t got, int64_t expected) const {
    if (ok) return;
    std::ostringstream message;
    message << where_ << ": " << what << " is " << got << ", expected " << expected;
    throw CheckFailed(message.str());
  }
  void Equal(const std::string& what, int64_t got, int64_t expected) const {
    Expect(got == expected, what, got, expected);
  }

 private:
  std::string where_;
};

Record ReadRecord(const Pool& pool, CanaryLaunchTag tag, int64_t slot) {
  const std::vector<uint8_t> bytes =
      pool.canary(tag).Download<uint8_t>(slot * kCanarySlotBytes, kCanarySlotBytes);
  Record record;
  std::memcpy(record.data(), bytes.data(), sizeof(record));
  return record;
}

void WriteRecord(const Pool& pool, CanaryLaunchTag tag, int64_t slot, const Record& record) {
  pool.canary(tag).Upload(reinterpret_cast<const uint8_t*>(record.data()), kCanarySlotBytes,
                          slot * kCanarySlotBytes);
}

void CheckPlan(const Checker& check, const CaseLayout& layout, const InputSet& set) {
  const BenchCase& shape = layout.shape();
  const int64_t batch = shape.batch;
  const int64_t prefix = shape.prefix;
  check.Equal("verify_num_valid", set.verify_num_valid.Read<int32_t>(0), set.verify_entries);
  check.Equal("verify enable", set.verify_enable.Read<int32_t>(0), 1);
  check.Equal("write_num_valid_reqs", set.write_num_valid_reqs.Read<int32_t>(0), batch);
  check.Equal("write_offsets[bs]", set.write_offsets.Read<int64_t>(batch), set.write_tokens);
  const int64_t first = set.first_request;
  const int64_t last = first + batch - 1;
  check.Equal("seed of row 0", set.write_seeds.Read<int64_t>(0),
              prefix > 0 ? layout.Slot(first, prefix - 1) : -1);
  if (set.verify_entries == 0) return;
  const int64_t e = set.verify_entries - 1;
  check.Equal("entry 0 slot", set.verify_slots.Read<int64_t>(0), layout.Slot(first, 0));
  check.Equal("entry 0 predecessor", set.verify_prevs.Read<int64_t>(0), -1);
  check.Equal("last entry slot", set.verify_slots.Read<int64_t>(e), layout.Slot(last, prefix - 1));
  check.Equal("last entry position", set.verify_positions.Read<int64_t>(e), prefix - 1);
  check.Equal("last entry predecessor", set.verify_prevs.Read<int64_t>(e),
              prefix > 1 ? layout.Slot(last, prefix - 2) : -1);
}

// Breaks the position of one verified record and expects `run_verify` to report that slot.
template <typename RunVerify>
void ProbeVerify(const Checker& check, Pool& pool, const CaseLayout& layout, const InputSet& set,
                 RunVerify&& run_verify) {
  const CanaryLaunchTag tag = CanaryLaunchTag::kTailKFull;
  const int64_t slot = layout.Slot(set.first_request, layout.shape().prefix - 1);
  const Record good = ReadRecord(pool, tag, slot);
  Record broken = good;
  broken[kCanaryFieldPosition] += 1;
  WriteRecord(pool, tag, slot, broken);
  run_verify(StepTagIndex(tag));
  pool.device().Synchronize();
  WriteRecord(pool, tag, slot, good);
  const int32_t found = pool.ViolationCount();
  check.Expect(found >= 1, "violations after breaking one record", found, 1);
  const auto row = pool.FirstViolation();
  check.Equal("violation slot", row[kViolationFieldSlotIdx], slot);
  check.Equal("violation position bit",
              row[kViolationFieldFailReasonBits] & FailReason::kVerifyPositionMismatch,
              FailReason::kVerifyPositionMismatch);
  pool.ResetViolations();
}

}  // namespace

void CheckCase(Pool& pool, const CaseLayout& layout, const std::vector<InputSet>& sets,
               RealData mode) {
  const Checker check("check " + layout.shape().name + " " + RealDataName(mode));
  CheckNoViolations(pool, "before " + layout.shape().name);
  std::array<int64_t, 4> slot_runs{}, kernel_runs{};
  for (int t = 0; t < 4; ++t) {
    slot_runs[t] = pool.SlotRunCount(kStepTags[t]);
    kernel_runs[t] = pool.KernelRunCount(kStepTags[t]);
  }
  // Each set runs the planned step (whose entries CheckPlan reads), then the runtime's fused
  // step and the step storing its entries, which rewrite the same records with the same values;
  // the stored step's HEAD stores into the plan's arrays the entries the plan wrote there.
  constexpr int kSteps = 3;
  for (const InputSet& set : sets) {
    RunPlannedStep(set, pool.device().stream());
    pool.device().Synchronize();
    CheckPlan(check, layout, set);
    RunStep(set, pool.device().stream(), set.stores_entries);
    RunStep(set, pool.device().stream(), /*store_entries=*/true);
    pool.device().Synchronize();
    CheckPlan(check, layout, set);
  }
  pool.device().Synchronize();
  check.Equal("violations", pool.ViolationCount(), 0);
  const int64_t count = static_cast<int64_t>(sets.size());
  for (int t = 0; t < 4; ++t) {
    const std::string tag = LaunchTagName(static_cast<int64_t>(kStepTags[t]));
    // Verify counts every entry, write every token written.
    check.Equal(tag + " slot_run_counter increase", pool.SlotRunCount(kStepTags[t]) - slot_runs[t],
                kSteps * count * (sets[0].verify_entries + sets[0].write_tokens));
    check.Equal(tag + " kernel_run_counter increase",
                pool.KernelRunCount(kStepTags[t]) - kernel_runs[t], kSteps * 2 * count);
  }
  const InputSet& set = sets.front();
  if (set.write_tokens > 0) {
    const int64_t slot = set.out_cache_loc.Read<int64_t>(0);
    const int64_t position = layout.shape().prefix;
    for (CanaryLaunchTag tag : kStepTags) {
      const Record record = ReadRecord(pool, tag, slot);
      check.Equal("written token", record[kCanaryFieldToken], TokenAt(position));
      check.Equal("written position", record[kCanaryFieldPosition], position);
      // Random KV fingerprints to 0 with probability 2^-64.
      const bool fingerprinted = pool.FoldedLayers(tag, mode) > 0;
      check.Equal("written record has a fingerprint", record[kCanaryFieldRealKvHash] != 0,
                  fingerprinted);
    }
  }
  if (set.verify_entries > 0) {
    const StreamHandle stream = pool.device().stream();
    ProbeVerify(check, pool, layout, set, [&](int t) { Verify(set.verify_args[t], stream); });
    ProbeVerify(check, pool, layout, set,
                [&](int t) { FusedVerify(set.fused_verify_args[t], stream); });
  }
}

void CheckNoViolations(const Pool& pool, const std::string& where) {
  Checker(where).Equal("violations", pool.ViolationCount(), 0);
}

}  // namespace kvcanary::bench
