// The method bodies of EngineSim (engine_sim.h), the small engine of the engine property tests.
#include "engine_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "property_oracle.h"
#include "testutil.h"

namespace kvcanary::testing {

EngineSim::EngineSim(const SimConfig& config)
    : config_(config),
      rng_(config.seed),
      num_slots_(config.swa ? kSwaSlots : kFullSlots),
      state_(num_slots_, /*ring_capacity=*/16, RandomStride(config.seed)),
      model_(num_slots_),
      req_to_token_({kReqRows, kWidth}),
      pool_({kReqRows, kWidth + 1}) {
  for (int64_t row = kReqRows - 1; row >= 1; --row) free_rows_.push_back(row);
  for (int64_t slot = 1; slot < kFullSlots; ++slot) free_slots_.push_back(slot);
  rng_.Shuffle(free_slots_);
  if (config.swa) {
    window_ = rng_.Uniform(1, 12);
    std::vector<int64_t> group_slots(kSwaSlots - 1);
    std::iota(group_slots.begin(), group_slots.end(), 1);
    rng_.Shuffle(group_slots);
    lut_ = {0};  // padded tokens' dummy slot 0 stays 0
    lut_.insert(lut_.end(), group_slots.begin(), group_slots.begin() + kFullSlots - 1);
  }
  sources_ = RandomSources(rng_, num_slots_);
  FillSlotTails(rng_, state_);
  tails_ = SlotTails(state_);
}

void EngineSim::Step() {
  RetireFinished();
  AdmitNew();
  const std::vector<Row> batch = ChooseBatch();
  const Forward forward = AllocateForward(batch);
  const PlanInputs in = InputsOf(batch, /*all_tokens_known=*/false);
  const int64_t total = Size(OraclePlan(in).entries);
  const PlanBuffers plan = SentinelBuffers(total + rng_.Uniform(1, 4), Size(batch) + 1);
  PlanCall(in).Fused(plan, rng_.Chance(0.5));
  ExpectPlanMatchesOracle(in, plan);
  ExpectCleanVerify(plan.verify(), total, rng_.Chance(0.5));
  ExpectClampedCountsOnTightPlan(plan, total);
  WriteKv(forward);
  WriteAndExpectModel(plan, forward);
  for (const Row& row : batch) {
    if (row.req >= 0) live_[row.req].len += row.extend;
  }
}

void EngineSim::CheckSingleFieldCorruptions() {
  const std::vector<Row> batch = VerifyOnlyBatch();
  if (batch.empty()) return;
  const PlanInputs in = InputsOf(batch, /*all_tokens_known=*/true);
  const int64_t total = Size(OraclePlan(in).entries);
  const PlanBuffers plan = SentinelBuffers(total + 1, Size(batch) + 1);
  PlanCall(in).Fused(plan, false);
  ExpectCleanVerify(plan.verify(), total, true);

  const Request& req = live_[batch[rng_.Uniform(0, Size(batch) - 1)].req];
  const int64_t window_start = config_.swa ? std::max<int64_t>(req.len - window_, 0) : 0;
  const int64_t p = rng_.Uniform(std::max<int64_t>(window_start - 1, 0), req.len - 1);
  const int64_t slot = CanarySlot(req_to_token_.at(req.rp, p));
  const bool slot_verified = p >= window_start;
  const int64_t successor = p + 1 < req.len ? CanarySlot(req_to_token_.at(req.rp, p + 1)) : -1;
  const bool check_token = rng_.Chance(0.5);
  SCOPED_TRACE("corrupted slot " + std::to_string(slot) + " at position " + std::to_string(p));

  for (Corruption corruption : kCorruptions) {
    SCOPED_TRACE(CorruptionName(corruption));
    const HostTensor<uint8_t> canary_before = state_.canary;
    const std::vector<KvSource> sources_before = sources_;
    if (!Corrupt(corruption, slot)) continue;
    const std::vector<RowKey> expected =
        ExpectedRows(corruption, slot_verified ? slot : -1, successor, check_token);
    state_.write_index[0] = 0;
    RunVerify(plan.verify(), check_token);
    const std::vector<ViolationRow> rows = state_.rows();
    std::vector<RowKey> keys;
    for (const ViolationRow& row : rows) keys.push_back(RowKey{row.slot_idx, row.fail_reason_bits});
    EXPECT_EQ(keys, expected);
    ExpectRowColumns(rows, check_token, slot);
    if (corruption == Corruption::kPosition) ExpectOverflowedPlanChecksNothing(in, total);
    Restore(canary_before, sources_before);
  }
  state_.write_index[0] = 0;
}

void EngineSim::ExpectFinalVerifyClean() {
  const std::vector<Row> batch = VerifyOnlyBatch();
  const PlanInputs in = InputsOf(batch, /*all_tokens_known=*/true);
  const int64_t total = Size(OraclePlan(in).entries);
  const PlanBuffers plan = SentinelBuffers(total + 1, Size(batch) + 1);
  PlanCall(in).Fused(plan, false);
  ExpectCleanVerify(plan.verify(), total, true);
}

void EngineSim::RetireFinished() {
  for (size_t i = 0; i < live_.size();) {
    Request& req = live_[i];
    if (req.len < req.target) {
      ++i;
      continue;
    }
    for (int64_t p = 0; p < req.len; ++p) free_slots_.push_back(req_to_token_.at(req.rp, p));
    free_rows_.push_back(req.rp);
    live_.erase(live_.begin() + i);
  }
}

void EngineSim::AdmitNew() {
  std::vector<int64_t> flat, offsets = {0}, rps;
  while (!free_rows_.empty() && (live_.empty() || rng_.Chance(0.5))) {
    Request req;
    req.rp = free_rows_.back();
    free_rows_.pop_back();
    req.target = rng_.Uniform(1, kWidth);
    for (int64_t i = 0; i < req.target + config_.token_offset; ++i) {
      req.tokens.push_back(rng_.Uniform(0, 50000));
    }
    flat.insert(flat.end(), req.tokens.begin(), req.tokens.end());
    offsets.push_back(Size(flat));
    rps.push_back(req.rp);
    live_.push_back(std::move(req));
  }
  const HostTensor<int64_t> flat_t = HostTensor<int64_t>::Of(flat);
  const HostTensor<int64_t> offsets_t = HostTensor<int64_t>::Of(offsets);
  const HostTensor<int64_t> rps_t = HostTensor<int64_t>::Of(rps);
  Scatter(ScatterArgs{flat_t.view(), offsets_t.view(), rps_t.view(), pool_.view()});
}

std::vector<EngineSim::Row> EngineSim::ChooseBatch() {
  std::vector<int64_t> order(live_.size());
  std::iota(order.begin(), order.end(), 0);
  rng_.Shuffle(order);
  std::vector<Row> batch;
  for (int64_t i : order) {
    if (rng_.Chance(0.2)) continue;
    if (rng_.Chance(0.3)) batch.push_back(Row{-1, 0, rng_.Uniform(0, 5), rng_.Uniform(0, 3)});
    const Request& req = live_[i];
    const int64_t remaining = req.target - req.len;
    int64_t extend = 1;
    if (req.len == 0 || rng_.Chance(0.25)) {
      extend = rng_.Uniform(1, std::min<int64_t>(remaining, 12));
    }
    if (req.len > 0 && rng_.Chance(0.15)) extend = 0;
    batch.push_back(Row{i, req.rp, req.len, extend});
  }
  return batch;
}

EngineSim::Forward EngineSim::AllocateForward(const std::vector<Row>& batch) {
  Forward forward;
  for (const Row& row : batch) {
    if (row.req < 0) continue;
    const Request& req = live_[row.req];
    for (int64_t pos = row.prefix; pos < row.prefix + row.extend; ++pos) {
      const int64_t slot = free_slots_.back();
      free_slots_.pop_back();
      req_to_token_.at(req.rp, pos) = static_cast<int32_t>(slot);
      forward.ids.push_back(req.tokens[pos + config_.token_offset]);
      forward.positions.push_back(pos);
      forward.full_slots.push_back(slot);
      forward.owners.push_back(row.req);
    }
  }
  for (int64_t pad = rng_.Uniform(0, 3); pad > 0; --pad) {
    forward.ids.push_back(rng_.Uniform(0, 50000));
    forward.positions.push_back(rng_.Uniform(0, kWidth));
    forward.full_slots.push_back(0);
    forward.owners.push_back(-1);
  }
  return forward;
}

PlanInputs EngineSim::InputsOf(const std::vector<Row>& batch, bool all_tokens_known) {
  PlanInputs in;
  for (const Row& row : batch) {
    in.rp.push_back(row.rp);
    in.prefix.push_back(row.prefix);
    in.extend.push_back(row.extend);
    const int64_t known = row.req < 0 ? 0 : Size(live_[row.req].tokens);
    in.valid_lens.push_back(all_tokens_known ? known : rng_.Uniform(0, known));
  }
  in.req_to_token = req_to_token_;
  in.window = window_;
  in.lut = lut_;
  in.has_pool = true;
  in.pool = pool_;
  in.token_offset = config_.token_offset;
  return in;
}

void EngineSim::ExpectCleanVerify(const VerifyPlanView& plan, int64_t total, bool check_token) {
  ByteSnapshot canary(state_.canary);
  const int64_t kernels = state_.kernel_run_counter[0];
  const int64_t slots = state_.slot_run_counter[0];
  RunVerify(plan, check_token);
  EXPECT_EQ(state_.write_index[0], 0) << "first row " << state_.ring.values()[1];
  EXPECT_TRUE(canary.Unchanged()) << "verify wrote the canary buffer";
  EXPECT_EQ(state_.kernel_run_counter[0], kernels + 1);
  EXPECT_EQ(state_.slot_run_counter[0], slots + total);
}

void EngineSim::ExpectClampedCountsOnTightPlan(const PlanBuffers& plan, int64_t total) {
  if (total == 0) return;
  const HostTensor<int32_t> num_valid({1}, static_cast<int32_t>(rng_.Uniform(-3, total + 3)));
  const HostTensor<int32_t> enable({1}, 1);
  const VerifyPlanView tight{
      plan.slots.view({total}), plan.tokens.view({total}), plan.positions.view({total}),
      plan.prevs.view({total}), num_valid.view(),          enable.view()};
  const int64_t slots = state_.slot_run_counter[0];
  RunVerify(tight, false);
  EXPECT_EQ(state_.write_index[0], 0);
  EXPECT_EQ(state_.slot_run_counter[0], slots + std::clamp<int64_t>(num_valid[0], 0, total));
}

void EngineSim::ExpectOverflowedPlanChecksNothing(const PlanInputs& in, int64_t total) {
  if (total < 2) return;
  const PlanBuffers overflowed = SentinelBuffers(total - 1, in.bs() + 1);
  PlanCall(in).Fused(overflowed, false);
  ASSERT_EQ(overflowed.enable[0], 0);
  const int32_t write_index = state_.write_index[0];
  const int64_t kernels = state_.kernel_run_counter[0];
  const int64_t slots = state_.slot_run_counter[0];
  RunVerify(overflowed.verify(), true);
  EXPECT_EQ(state_.write_index[0], write_index);
  EXPECT_EQ(state_.kernel_run_counter[0], kernels + 1);
  EXPECT_EQ(state_.slot_run_counter[0], slots);
}

void EngineSim::WriteKv(const Forward& forward) {
  for (int64_t i = 0; i < Size(forward.ids); ++i) {
    if (forward.owners[i] < 0) continue;
    const int64_t slot = CanarySlot(forward.full_slots[i]);
    for (KvSource& source : sources_) {
      uint8_t* strip = source.bytes.data() + source.StripOffset(slot);
      for (int64_t b = 0; b < source.bytes_per_token; ++b) strip[b] = rng_.Uniform(0, 255);
    }
  }
}

void EngineSim::WriteAndExpectModel(const PlanBuffers& plan, const Forward& forward) {
  const HostTensor<int64_t> ids = HostTensor<int64_t>::Of(forward.ids);
  const HostTensor<int64_t> positions = HostTensor<int64_t>::Of(forward.positions);
  const HostTensor<int64_t> loc = OutCacheLoc(forward);
  WriteArgs args;
  args.context = ContextWith(state_, sources_, config_.mode);
  args.plan = plan.write();
  args.input_ids = ids.view();
  args.positions = positions.view();
  args.out_cache_loc = loc.view();
  args.enable_write_input_assert = rng_.Chance(0.5);
  if (args.enable_write_input_assert) {
    args.expected_input_tokens = ids.view();
    args.expected_input_positions = positions.view();
  }
  state_.chain_assert[0] = rng_.Chance(0.5) ? 1 : 0;
  const int64_t kernels = state_.kernel_run_counter[0];
  const int64_t slots = state_.slot_run_counter[0];
  Write(args);

  int64_t written = 0;
  for (int64_t i = 0; i < Size(forward.ids); ++i) {
    if (forward.owners[i] < 0) continue;
    Request& req = live_[forward.owners[i]];
    const int64_t slot = loc[i];
    model_[slot] = Record{ids[i], positions[i], ToSigned(req.running),
                          ToSigned(OracleRealKv(sources_, config_.mode, slot))};
    req.running = ChainStep(req.running, ids[i], positions[i]);
    ++written;
  }
  EXPECT_EQ(state_.write_index[0], 0) << "first row " << state_.ring.values()[1];
  EXPECT_EQ(state_.kernel_run_counter[0], kernels + 1);
  EXPECT_EQ(state_.slot_run_counter[0], slots + written);
  for (int64_t s = 0; s < num_slots_; ++s) {
    ASSERT_EQ(state_.record(s), model_[s]) << "slot " << s;
  }
  EXPECT_EQ(SlotTails(state_), tails_) << "bytes past 32 of a slot were written";
}

bool EngineSim::Corrupt(Corruption corruption, int64_t slot) {
  Record record = state_.record(slot);
  const int64_t flip = rng_.Uniform(1, 1000);
  switch (corruption) {
    case Corruption::kToken:
      record.token ^= flip;
      break;
    case Corruption::kPosition:
      record.position += flip;
      break;
    case Corruption::kPrevHash:
      record.prev_hash ^= flip;
      break;
    case Corruption::kRealKvHash:
      record.real_kv_hash ^= flip;
      break;
    case Corruption::kKvByte:
    case Corruption::kKvByteOutsideFold:
      return CorruptKvByte(corruption, slot);
  }
  state_.set_record(slot, record);
  return true;
}

bool EngineSim::CorruptKvByte(Corruption corruption, int64_t slot) {
  KvSource& source = sources_[rng_.Uniform(0, Size(sources_) - 1)];
  const int64_t fold = FoldBytes(source, config_.mode);
  int64_t offset = 0;
  if (corruption == Corruption::kKvByte) {
    offset = rng_.Uniform(0, std::max<int64_t>(fold, 16) - 1);  // mode NONE: folds nothing
  } else {
    if (fold >= source.bytes_per_token) return false;
    offset = rng_.Uniform(fold, source.bytes_per_token - 1);
  }
  source.bytes.data()[source.StripOffset(slot) + offset] ^= rng_.Uniform(1, 255);
  return true;
}

std::vector<RowKey> EngineSim::ExpectedRows(Corruption corruption, int64_t verified_slot,
                                            int64_t successor, bool check_token) const {
  std::vector<RowKey> rows;
  const int64_t own_bits = OwnBits(corruption, check_token);
  if (verified_slot >= 0 && own_bits != 0) rows.push_back(RowKey{verified_slot, own_bits});
  const bool changes_slot_hash = corruption == Corruption::kToken ||
                                 corruption == Corruption::kPosition ||
                                 corruption == Corruption::kPrevHash;
  if (changes_slot_hash && successor >= 0) {
    rows.push_back(RowKey{successor, FailReason::kVerifyChainHashMismatch});
  }
  return rows;
}

int64_t EngineSim::OwnBits(Corruption corruption, bool check_token) const {
  switch (corruption) {
    case Corruption::kToken:
      return check_token ? FailReason::kVerifyTokenMismatch : 0;
    case Corruption::kPosition:
      return FailReason::kVerifyPositionMismatch;
    case Corruption::kPrevHash:
      return FailReason::kVerifyChainHashMismatch;
    case Corruption::kRealKvHash:
      return FailReason::kVerifyRealKvHashMismatch;
    case Corruption::kKvByte:
      return config_.mode == RealKvHashMode::kNone ? 0 : FailReason::kVerifyRealKvHashMismatch;
    case Corruption::kKvByteOutsideFold:
      return 0;
  }
  return 0;
}

void EngineSim::ExpectRowColumns(const std::vector<ViolationRow>& rows, bool check_token,
                                 int64_t corrupted_slot) const {
  for (const ViolationRow& row : rows) {
    const Record stored = state_.record(row.slot_idx);
    EXPECT_EQ(row.kernel_kind, static_cast<int64_t>(CanaryLaunchTag::kTailKFull));
    EXPECT_EQ(row.position, stored.position);
    EXPECT_EQ(row.stored_token, stored.token);
    EXPECT_EQ(row.expected_token, check_token ? model_[row.slot_idx].token : -1);
    EXPECT_EQ(row.stored_chain_hash, stored.prev_hash);
    int64_t expected_aux = stored.prev_hash;  // the chain holds or is unchecked
    if ((row.fail_reason_bits & FailReason::kVerifyChainHashMismatch) != 0) {
      expected_aux = row.slot_idx == corrupted_slot
                         ? model_[row.slot_idx].prev_hash
                         : ToSigned(OracleSlotHash(state_.record(corrupted_slot)));
    }
    EXPECT_EQ(row.expected_aux, expected_aux);
  }
}

}  // namespace kvcanary::testing
