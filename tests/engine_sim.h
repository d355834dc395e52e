// EngineSim, the small engine of the engine property tests (test_properties_engine.cpp), and the
// types it needs: the configuration of one run, the single-field corruptions it applies and the
// key of a reported violation row. Method bodies are in engine_sim.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "property_oracle.h"
#include "testutil.h"

namespace kvcanary::testing {

struct SimConfig {
  uint64_t seed = 0;
  RealKvHashMode mode = RealKvHashMode::kNone;
  bool swa = false;
  int64_t token_offset = 0;
};
inline std::string ConfigTrace(const SimConfig& c) {
  return SeedTrace(c.seed) + " mode=" + std::to_string(static_cast<int>(c.mode)) +
         (c.swa ? " SWA" : " FULL") + " token_offset=" + std::to_string(c.token_offset);
}

enum class Corruption { kToken, kPosition, kPrevHash, kRealKvHash, kKvByte, kKvByteOutsideFold };
inline constexpr Corruption kCorruptions[] = {
    Corruption::kToken,      Corruption::kPosition, Corruption::kPrevHash,
    Corruption::kRealKvHash, Corruption::kKvByte,   Corruption::kKvByteOutsideFold};
inline const char* CorruptionName(Corruption c) {
  constexpr const char* kNames[] = {"token",        "position", "prev_hash",
                                    "real_kv_hash", "kv byte",  "kv byte outside the fold"};
  return kNames[static_cast<int>(c)];
}

struct RowKey {
  int64_t slot = 0;
  int64_t bits = 0;
  bool operator==(const RowKey&) const = default;
};
inline std::ostream& operator<<(std::ostream& out, const RowKey& k) {
  return out << "{slot " << k.slot << ", bits " << k.bits << "}";
}

// A small engine: requests in a req_to_token table of distinct slots, prefill then decode, with
// Plan + Verify + Write every step, an expected-token pool filled by Scatter, and real-KV bytes
// written before each write launch. The model holds what every canary slot must contain.
class EngineSim {
 public:
  static constexpr int64_t kReqRows = 9;  // row 0 is the padding row
  static constexpr int64_t kWidth = 40;
  static constexpr int64_t kFullSlots = 400;
  static constexpr int64_t kSwaSlots = 448;

  explicit EngineSim(const SimConfig& config);

  // One forward: admit, plan, verify (must be clean), write (must match the model).
  void Step();

  // After a clean history: corrupts one field of one record at a time and checks exactly which
  // verify entries report it, with which bits.
  void CheckSingleFieldCorruptions();

  // A verify-only plan of every live request (prefix = its length) must record nothing.
  void ExpectFinalVerifyClean();

 private:
  struct Request {
    int64_t rp = 0;
    std::vector<int64_t> tokens;  // the record at position p carries tokens[p + token_offset]
    int64_t target = 0;           // final KV length
    int64_t len = 0;              // KV tokens written so far
    uint64_t running = ChainHeadHash();  // oracle running hash after position len - 1
  };
  struct Row {
    int64_t req = -1;  // index into live_, -1 for a padding row
    int64_t rp = 0, prefix = 0, extend = 0;
  };
  struct Forward {
    std::vector<int64_t> ids, positions, full_slots, owners;  // owners: live_ index, -1 = pad
  };

  int64_t CanarySlot(int64_t full_slot) const { return config_.swa ? lut_[full_slot] : full_slot; }

  void RetireFinished();

  // New requests take free rows; their tokens go into the pool through Scatter.
  void AdmitNew();

  // Live requests in random order (prefill chunks, decodes, verify-only rows, some sitting out)
  // with padding rows interleaved.
  std::vector<Row> ChooseBatch();

  // Rows of every live request with KV, prefix = its length, extend 0.
  std::vector<Row> VerifyOnlyBatch() const {
    std::vector<Row> batch;
    for (int64_t i = 0; i < Size(live_); ++i) {
      if (live_[i].len > 0) batch.push_back(Row{i, live_[i].rp, live_[i].len, 0});
    }
    return batch;
  }

  // Allocates the slots of every token the batch writes, then appends padded tokens.
  Forward AllocateForward(const std::vector<Row>& batch);

  // The plan inputs of a batch. Unless `all_tokens_known`, each row's pool row is valid only up
  // to a random length, so some entries expect token -1 (not checked).
  PlanInputs InputsOf(const std::vector<Row>& batch, bool all_tokens_known);

  void RunVerify(const VerifyPlanView& plan, bool check_token) {
    Verify(VerifyArgs{ContextWith(state_, sources_, config_.mode), plan, check_token});
  }

  // A consistent buffer: nothing recorded, records untouched, counters bumped.
  void ExpectCleanVerify(const VerifyPlanView& plan, int64_t total, bool check_token);

  // The plan's first `total` entries as a tight plan with a random device count: the slot counter
  // grows by the count clamped to [0, total] (D2).
  void ExpectClampedCountsOnTightPlan(const PlanBuffers& plan, int64_t total);

  // Overflow (capacity one short): enable 0, so only kernel_run_counter moves, even though the
  // buffer is corrupt right now.
  void ExpectOverflowedPlanChecksNothing(const PlanInputs& in, int64_t total);

  // The engine writes the KV of this forward's tokens before the write op runs.
  void WriteKv(const Forward& forward);

  HostTensor<int64_t> OutCacheLoc(const Forward& forward) const {
    const HostTensor<int64_t> full = HostTensor<int64_t>::Of(forward.full_slots);
    if (!config_.swa) return full;
    const HostTensor<int64_t> lut = HostTensor<int64_t>::Of(lut_);
    HostTensor<int64_t> translated({Size(forward.full_slots)});
    SwaTranslate(SwaTranslateArgs{full.view(), lut.view(), translated.view()});
    return translated;
  }

  void WriteAndExpectModel(const PlanBuffers& plan, const Forward& forward);

  // Applies one corruption to `slot`; false when it does not apply to this configuration.
  bool Corrupt(Corruption corruption, int64_t slot);

  // Flips one byte of one source's strip of `slot`, inside or outside the folded range.
  bool CorruptKvByte(Corruption corruption, int64_t slot);

  // The rows verify must record, in entry order: the corrupted slot's own entry (when verified,
  // i.e. verified_slot >= 0), then its successor's chain check (when it has one).
  std::vector<RowKey> ExpectedRows(Corruption corruption, int64_t verified_slot, int64_t successor,
                                   bool check_token) const;

  // Puts the canary buffer and the KV bytes back (in place: views point at them).
  void Restore(const HostTensor<uint8_t>& canary, const std::vector<KvSource>& sources) {
    std::copy(canary.values().begin(), canary.values().end(), state_.canary.values().begin());
    for (size_t i = 0; i < sources_.size(); ++i) {
      std::copy(sources[i].bytes.values().begin(), sources[i].bytes.values().end(),
                sources_[i].bytes.values().begin());
    }
  }

  // The bits the corrupted slot's own entry reports.
  int64_t OwnBits(Corruption corruption, bool check_token) const;

  // A verify row reports the stored token, position and prev_hash of its slot.
  // Every column of a verify row: the stored record's fields, the plan's token (-1
  // with the check off) and the prev_hash the chain expects; only `corrupted_slot` differs from
  // the model.
  void ExpectRowColumns(const std::vector<ViolationRow>& rows, bool check_token,
                        int64_t corrupted_slot) const;

  SimConfig config_;
  Rng rng_;
  int64_t num_slots_;
  CanaryState state_;
  std::vector<Record> model_;   // what every canary slot must hold
  std::vector<uint8_t> tails_;  // bytes [32, stride) of every slot, never written
  HostTensor<int32_t> req_to_token_;
  HostTensor<int32_t> pool_;
  int64_t window_ = 0;
  std::vector<int64_t> lut_;  // full slot -> SWA slot, injective; empty for FULL
  std::vector<KvSource> sources_;
  std::vector<Request> live_;
  std::vector<int64_t> free_rows_, free_slots_;
};

}  // namespace kvcanary::testing
