// Shared builders of the edge-case tests (test_edge_cases*.cpp): the smallest plan, verify and
// write inputs that show one edge-case rule or one deviation from SGLang.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {

inline constexpr int64_t kTail = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);
inline constexpr int64_t kHead = static_cast<int64_t>(CanaryLaunchTag::kHeadKFull);
inline constexpr int64_t kChain = FailReason::kVerifyChainHashMismatch;
inline constexpr int64_t kRealKv = FailReason::kVerifyRealKvHashMismatch;
inline const int64_t kHeadHash = ToSigned(ChainHeadHash());

inline std::vector<int64_t> Head(const HostTensor<int64_t>& t, int64_t n) {
  return std::vector<int64_t>(t.values().begin(), t.values().begin() + n);
}

// req_to_token[row][col] = row * 8 + col + 1: every slot distinct and non-zero.
inline HostTensor<int32_t> Table(int64_t rows, int64_t width) {
  HostTensor<int32_t> table({rows, width});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) table.at(r, c) = static_cast<int32_t>(r * 8 + c + 1);
  }
  return table;
}

// ---------------------------------------------------------------------------------------------
// Plan.

struct PlanCase {
  std::vector<int64_t> rp, prefix, extend;
  HostTensor<int32_t> req_to_token = Table(3, 8);
  int64_t window = 0;
  std::vector<int64_t> lut;  // empty: no LUT
  std::optional<HostTensor<int32_t>> pool;
  std::vector<int64_t> valid_lens;
  int64_t token_offset = 0;
};

inline PlanArgs PlanArgsOf(const PlanCase& c, const PlanBuffers& out, const HostTensor<int64_t>& rp,
                           const HostTensor<int64_t>& prefix, const HostTensor<int64_t>& extend,
                           const HostTensor<int64_t>& lut, const HostTensor<int64_t>& valid_lens) {
  PlanArgs args = PlanCallOver(out, rp.view(), prefix.view(), extend.view(), c.req_to_token.view());
  args.inputs.swa_window_size = c.window;
  if (!c.lut.empty()) args.inputs.full_to_swa_index_mapping = lut.view();
  if (c.pool.has_value()) {
    args.inputs.req_to_verify_expected_tokens = c.pool->view();
    args.inputs.req_to_verify_expected_tokens_valid_lens = valid_lens.view();
  }
  args.inputs.kv_token_id_vs_position_offset = c.token_offset;
  return args;
}

inline PlanBuffers RunPlan(const PlanCase& c, int64_t verify_capacity = 64,
                           int64_t write_capacity = 8) {
  PlanBuffers out(verify_capacity, write_capacity);
  const auto rp = HostTensor<int64_t>::Of(c.rp);
  const auto prefix = HostTensor<int64_t>::Of(c.prefix);
  const auto extend = HostTensor<int64_t>::Of(c.extend);
  const auto lut = HostTensor<int64_t>::Of(c.lut);
  const auto valid_lens = HostTensor<int64_t>::Of(c.valid_lens);
  Plan(PlanArgsOf(c, out, rp, prefix, extend, lut, valid_lens));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Verify and write.

struct HandEntry {
  int64_t slot = 0;
  int64_t prev = -1;
  int64_t position = 0;
  int64_t token = -1;
};

// A verify plan of exactly these entries (capacity = their number).
inline PlanBuffers HandPlan(const std::vector<HandEntry>& entries) {
  PlanBuffers plan(static_cast<int64_t>(entries.size()), 1);
  for (size_t e = 0; e < entries.size(); ++e) {
    plan.slots[e] = entries[e].slot;
    plan.prevs[e] = entries[e].prev;
    plan.positions[e] = entries[e].position;
    plan.tokens[e] = entries[e].token;
  }
  plan.num_valid[0] = static_cast<int32_t>(entries.size());
  plan.enable[0] = 1;
  return plan;
}

inline void RunVerify(const LaunchContext& context, const PlanBuffers& plan,
                      bool check_token = false) {
  Verify(VerifyArgs{context, plan.verify(), check_token});
}

struct WriteBatch {
  std::vector<int64_t> offsets;  // [R + 1]
  std::vector<int64_t> seeds;    // [R]
  std::vector<int64_t> ids, positions, slots;
  std::vector<int64_t> expected_ids, expected_positions;  // given: input assert on
  std::optional<int32_t> num_valid_reqs;                  // absent: R
};

inline void RunWrite(const LaunchContext& context, const WriteBatch& b) {
  const auto offsets = HostTensor<int64_t>::Of(b.offsets);
  const auto seeds = HostTensor<int64_t>::Of(b.seeds);
  const HostTensor<int32_t> num_valid_reqs(
      {1}, b.num_valid_reqs.value_or(static_cast<int32_t>(b.seeds.size())));
  const auto ids = HostTensor<int64_t>::Of(b.ids);
  const auto positions = HostTensor<int64_t>::Of(b.positions);
  const auto slots = HostTensor<int64_t>::Of(b.slots);
  const auto expected_ids = HostTensor<int64_t>::Of(b.expected_ids);
  const auto expected_positions = HostTensor<int64_t>::Of(b.expected_positions);
  WriteArgs args;
  args.context = context;
  args.plan = WritePlanView{offsets.view(), seeds.view(), num_valid_reqs.view()};
  args.input_ids = ids.view();
  args.positions = positions.view();
  args.out_cache_loc = slots.view();
  args.enable_write_input_assert = !b.expected_ids.empty();
  if (args.enable_write_input_assert) {
    args.expected_input_tokens = expected_ids.view();
    args.expected_input_positions = expected_positions.view();
  }
  Write(args);
}

// Fills every record with non-zero bytes, so any entry that is checked fails.
inline void FillGarbage(CanaryState& state) {
  for (size_t i = 0; i < state.canary.values().size(); ++i) {
    state.canary.values()[i] = static_cast<uint8_t>(0x11 + i * 7);
  }
}

// The slots of the rows recorded so far, in ring order.
inline std::vector<int64_t> RowSlots(const CanaryState& state) {
  std::vector<int64_t> slots;
  for (const ViolationRow& row : state.rows()) slots.push_back(row.slot_idx);
  return slots;
}

// A uint8 [rows, 16] real-KV source whose row r holds bytes r*16 .. r*16+15, with page size 1.
struct ByteSource {
  explicit ByteSource(int64_t rows) : bytes({rows, 16}) {
    for (size_t i = 0; i < bytes.values().size(); ++i) bytes.values()[i] = static_cast<uint8_t>(i);
  }
  RealKvSource Source() const { return MakeRealKvSource(bytes.view(), 1, 16, 16); }
  HostTensor<uint8_t> bytes;
};

inline LaunchContext WithSources(LaunchContext context, const std::vector<RealKvSource>& sources,
                                 RealKvHashMode mode) {
  for (size_t i = 0; i < sources.size(); ++i) context.real_kv_sources[i] = sources[i];
  context.num_real_kv_sources = static_cast<int>(sources.size());
  context.real_kv_hash_mode = static_cast<int32_t>(mode);
  return context;
}

}  // namespace kvcanary::testing
