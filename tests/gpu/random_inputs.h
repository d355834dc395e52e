// Random valid inputs for the CPU-vs-CUDA tests (the differential sweep).
//
// A SweepCase (sweep_case.h) names the knobs of one case and its seed. MakeStep turns it into the
// host tensors of one forward step: a batch over a req_to_token table and SWA LUT (drawn by
// random_batch.h), a canary buffer that earlier steps filled (prefilled here by the CPU backend,
// then optionally corrupted), the plan buffers' stale contents, and the step's write inputs.
// Every case is valid input in the sense of Write: no launch writes a slot twice and no row writes
// another row's seed, so both backends must agree byte for byte (violation rows as a multiset).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "random_batch.h"
#include "step_inputs.h"
#include "sweep_case.h"
#include "testutil.h"

namespace kvcanary::testing {

namespace sweep_internal {

inline std::vector<KvSourceInput> MakeSources(const SweepCase& c, int64_t num_slots, Rng& rng) {
  std::vector<KvSourceInput> sources;
  const bool layered = c.num_layers > 0;
  for (int i = 0; i < (layered ? c.num_layers : c.num_sources); ++i) {
    KvSourceInput s;
    if (layered && i > 0) {  // every layer laid out like layer 0
      s = KvSourceInput{HostTensor<uint8_t>(sources[0].bytes.shape()), sources[0].page_size,
                        sources[0].num_bytes_per_token, sources[0].read_bytes};
      rng.Fill(s.bytes.values());
      sources.push_back(std::move(s));
      continue;
    }
    s.page_size = rng.Pick<int64_t>({1, 2, 16});
    s.num_bytes_per_token = rng.Pick<int64_t>({16, 32, 64});
    while (s.num_bytes_per_token > 16 && num_slots * s.num_bytes_per_token > (int64_t{8} << 20)) {
      s.num_bytes_per_token /= 2;  // bound the test's memory
    }
    s.read_bytes = 16 * rng.Int(1, s.num_bytes_per_token / 16);
    const int64_t padding = c.kv_row_padding ? 16 * rng.Int(1, 3) : 0;
    int64_t rows = (num_slots + s.page_size - 1) / s.page_size;
    if (i == 2 && rows > 1) --rows;  // the last page lies outside this source: hash 0 (D7)
    s.bytes = HostTensor<uint8_t>({rows, s.page_size * s.num_bytes_per_token + padding});
    if (c.random_kv_bytes) {
      rng.Fill(s.bytes.values());
    } else {
      std::fill(s.bytes.values().begin(), s.bytes.values().end(),
                static_cast<uint8_t>(rng.Int(0, 255)));
    }
    sources.push_back(std::move(s));
  }
  return sources;
}

inline std::vector<TensorView> SourceViews(const std::vector<KvSourceInput>& sources) {
  std::vector<TensorView> views;
  for (const KvSourceInput& s : sources) views.push_back(s.bytes.view());
  return views;
}

// Writes every prefix token of the batch with the CPU backend, each row chained from the anchor:
// the state earlier steps leave.
inline void Prefill(const Batch& b, HalfInputs& half, RealKvHashMode mode) {
  const auto bs = static_cast<int64_t>(b.rp.size());
  PlanBuffers plan(1, bs);
  std::vector<int64_t> ids, positions, slots;
  for (int64_t r = 0; r < bs; ++r) {
    plan.offsets[r] = static_cast<int64_t>(ids.size());
    plan.seeds[r] = -1;
    if (b.rp[r] == 0) continue;
    for (int64_t pos = 0; pos < b.prefix[r]; ++pos) {
      ids.push_back(b.tokens[r][pos]);
      positions.push_back(pos);
      slots.push_back(Translate(b.lut, Rt(b.table, b.rp[r], pos)));
    }
  }
  plan.offsets[bs] = static_cast<int64_t>(ids.size());
  plan.num_valid_reqs[0] = static_cast<int32_t>(bs);
  const HostTensor<int64_t> ids_t = HostTensor<int64_t>::Of(ids);
  const HostTensor<int64_t> positions_t = HostTensor<int64_t>::Of(positions);
  const HostTensor<int64_t> slots_t = HostTensor<int64_t>::Of(slots);
  WriteArgs args;
  const std::vector<TensorView> views = SourceViews(half.sources);
  const HostTensor<int64_t> layers = LayerAddresses(views);
  args.context = WithSources(half.state.Context(half.tag), views, half.sources, mode,
                             half.layered ? layers.view() : TensorView());
  args.plan = plan.write();
  args.input_ids = ids_t.view();
  args.positions = positions_t.view();
  args.out_cache_loc = slots_t.view();
  Write(args);
}

// Bytes past the 32 of a record are never read or written: fill them with noise.
inline void NoisePastRecords(CanaryState& state, Rng& rng) {
  const int64_t stride = state.canary.shape()[1];
  for (int64_t slot = 0; slot < state.canary.shape()[0]; ++slot) {
    for (int64_t b = kCanarySlotBytes; b < stride; ++b) {
      state.canary[slot * stride + b] = static_cast<uint8_t>(rng.Bits());
    }
  }
}

// Flips one bit in a few prefix records and in some KV bytes.
inline void Corrupt(const Batch& b, HalfInputs& half, Rng& rng) {
  const auto bs = static_cast<int64_t>(b.rp.size());
  const int64_t num_slots = half.state.canary.shape()[0];
  const int64_t stride = half.state.canary.shape()[1];
  int flipped = 0;
  for (int attempt = 0; attempt < 16 && flipped < 4; ++attempt) {
    const int64_t r = rng.Int(0, bs - 1);
    if (b.rp[r] == 0 || b.prefix[r] == 0) continue;
    const int64_t slot = Translate(b.lut, Rt(b.table, b.rp[r], rng.Int(0, b.prefix[r] - 1)));
    if (slot <= 0 || slot >= num_slots) continue;
    half.state.canary[slot * stride + rng.Int(0, kCanarySlotBytes - 1)] ^=
        static_cast<uint8_t>(1 << rng.Int(0, 7));
    ++flipped;
  }
  for (KvSourceInput& s : half.sources) {
    if (!rng.OneIn(2)) continue;
    const auto n = static_cast<int64_t>(s.bytes.values().size());
    s.bytes[rng.Int(0, n - 1)] ^= static_cast<uint8_t>(1 << rng.Int(0, 7));
  }
}

// A prefilled (and maybe corrupted) half with its own sources.
inline HalfInputs MakeHalf(const SweepCase& c, const Batch& b, int64_t ring_capacity,
                           CanaryLaunchTag tag, Rng& rng) {
  HalfInputs half{CanaryState(b.num_slots, ring_capacity, c.slot_stride_bytes),
                  MakeSources(c, b.num_slots, rng), static_cast<int64_t>(tag), c.num_layers > 0};
  NoisePastRecords(half.state, rng);
  Prefill(b, half, c.mode);
  if (c.corrupt) Corrupt(b, half, rng);
  return half;
}

// The plan buffers as a reused allocation holds them: noise (enable = 1, as allocate() makes it).
inline PlanBuffers StalePlan(int64_t verify_capacity, int64_t write_capacity, Rng& rng) {
  PlanBuffers plan(verify_capacity, write_capacity);
  for (HostTensor<int64_t>* t :
       {&plan.slots, &plan.tokens, &plan.positions, &plan.prevs, &plan.offsets, &plan.seeds}) {
    rng.Fill(t->values());
  }
  plan.num_valid[0] = static_cast<int32_t>(rng.Bits());
  plan.num_valid_reqs[0] = static_cast<int32_t>(rng.Bits());
  return plan;
}

}  // namespace sweep_internal

inline StepInputs MakeStep(const SweepCase& c) {
  using namespace sweep_internal;
  Rng rng(c.seed);
  const Batch b = MakeBatch(c, rng);
  const int64_t bs = c.bs;
  const bool swa = c.window > 0;
  HalfInputs primary =
      MakeHalf(c, b, kSweepRingCapacity,
               swa ? CanaryLaunchTag::kTailKSwa : CanaryLaunchTag::kTailKFull, rng);
  std::optional<HalfInputs> paired;
  if (c.paired) {
    paired = MakeHalf(c, b, 1, swa ? CanaryLaunchTag::kTailVSwa : CanaryLaunchTag::kTailVFull, rng);
  }

  // Capacities: the verify capacity around the entry count T the plan will make.
  int64_t total = 0;
  for (int64_t r = 0; r < bs; ++r) {
    if (b.rp[r] == 0) continue;
    const int64_t start = swa ? std::max<int64_t>(b.prefix[r] - c.window, 0) : 0;
    total += std::max<int64_t>(b.prefix[r] - start, 0);
  }
  int64_t verify_capacity = total + 1 + rng.Int(0, 64);
  if (c.capacity == CapacityKind::kTight) verify_capacity = std::max<int64_t>(total, 1);
  if (c.capacity == CapacityKind::kOneShort && total >= 2) verify_capacity = total - 1;
  const int64_t write_capacity = c.capacity == CapacityKind::kTight ? bs : bs + rng.Int(1, 8);

  StepInputs step(std::move(primary), StalePlan(verify_capacity, write_capacity, rng));
  step.paired = std::move(paired);
  step.mode = c.mode;
  step.req_pool_indices = HostTensor<int64_t>::Of(b.rp);
  step.prefix_lens = HostTensor<int64_t>::Of(b.prefix);
  step.extend_seq_lens = HostTensor<int64_t>::Of(b.extend);
  step.req_to_token = b.table;
  if (b.block_ids.has_value()) {
    step.block_size = c.block_size;
    if (c.wide_block_ids) {
      step.block_table64 = *b.block_ids;
    } else {
      step.block_table32 = HostTensor<int32_t>(b.block_ids->shape());
      for (size_t i = 0; i < b.block_ids->values().size(); ++i) {
        step.block_table32->values()[i] = static_cast<int32_t>(b.block_ids->values()[i]);
      }
    }
  } else if (c.strided_table) {  // the same table as a slice of a wider one: noise past its width
    const int64_t rows = b.table.shape()[0];
    const int64_t width = b.table.shape()[1];
    HostTensor<int32_t> wide({rows, width + 3});
    rng.Fill(wide.values());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < width; ++col) wide.at(r, col) = b.table[r * width + col];
    }
    step.req_to_token = std::move(wide);
    step.req_to_token_width = width;
  }
  step.window = c.window;
  step.lut = b.lut;
  if (c.scratch) step.scratch = HostTensor<int64_t>({bs + 1 + rng.Int(0, 2)}, -3);

  if (c.token_pool) {  // pool[rp][pos + offset] = token at pos
    const int64_t offset = c.pool_offset;
    HostTensor<int32_t> pool({b.table.shape()[0], b.table.shape()[1] + offset + 1});
    HostTensor<int64_t> valid_lens({bs});
    for (int64_t r = 0; r < bs; ++r) {
      valid_lens[r] = std::max<int64_t>(0, b.prefix[r] + offset + rng.Int(-2, 2));
      for (size_t pos = 0; pos < b.tokens[r].size(); ++pos) {
        pool.at(b.rp[r], static_cast<int64_t>(pos) + offset) =
            static_cast<int32_t>(b.tokens[r][pos]);
      }
    }
    for (int k = 0; c.corrupt && k < 2; ++k) {
      const int64_t r = rng.Int(0, bs - 1);
      if (b.rp[r] != 0 && b.prefix[r] > 0)
        pool.at(b.rp[r], rng.Int(0, b.prefix[r] - 1) + offset) += 1;
    }
    step.pool = std::move(pool);
    step.valid_lens = std::move(valid_lens);
    step.pool_offset = offset;
    step.check_token = true;
  }

  // Write inputs: every live row's new tokens in row order, then the padded tokens.
  std::vector<int64_t> ids, positions, slots;
  for (int64_t r = 0; r < bs; ++r) {
    if (b.rp[r] == 0) continue;
    for (int64_t pos = b.prefix[r]; pos < b.prefix[r] + b.extend[r]; ++pos) {
      ids.push_back(b.tokens[r][pos]);
      positions.push_back(pos);
      slots.push_back(Rt(b.table, b.rp[r], pos));
    }
  }
  const auto live = static_cast<int64_t>(ids.size());
  const int64_t padded = std::count(b.rp.begin(), b.rp.end(), 0) + rng.Int(0, 3);
  ids.resize(live + padded, 0);
  positions.resize(live + padded, 0);
  slots.resize(live + padded, 0);
  if (live > 0) {
    for (int64_t k = 0; c.skips && k < std::clamp<int64_t>(live / 100, 1, 16); ++k) {
      slots[rng.Int(0, live - 1)] = -1 - rng.Int(0, 3);
    }
    std::vector<int64_t> expected_ids = ids, expected_positions = positions;
    for (int k = 0; c.input_assert && k < 4; ++k) {
      const int64_t i = rng.Int(0, live - 1);
      const int64_t which = rng.Int(0, 2);  // token, position or both differ
      if (which != 1) expected_ids[i] += 1;
      if (which != 0) expected_positions[i] += 1;
    }
    for (int k = 0; c.chain_assert && k < 3; ++k) positions[rng.Int(0, live - 1)] += 1;
    if (c.input_assert) {
      step.expected_tokens = HostTensor<int64_t>::Of(expected_ids);
      step.expected_positions = HostTensor<int64_t>::Of(expected_positions);
    }
  } else if (c.input_assert) {
    step.expected_tokens = HostTensor<int64_t>::Of(ids);
    step.expected_positions = HostTensor<int64_t>::Of(positions);
  }
  step.input_ids = HostTensor<int64_t>::Of(ids);
  step.positions = HostTensor<int64_t>::Of(positions);
  step.out_cache_loc = HostTensor<int64_t>::Of(slots);
  if (c.chain_assert) {
    step.primary.state.chain_assert[0] = 1;
    if (step.paired) step.paired->state.chain_assert[0] = 1;
  }
  if (c.verify_sample > 1) {
    step.verify_sample = c.verify_sample;
    step.verify_phase = HostTensor<int64_t>({c.one_phase ? 1 : b.table.shape()[0]});
    for (int64_t& phase : step.verify_phase->values()) phase = rng.Int(-40, 40);
  }
  return step;
}

}  // namespace kvcanary::testing
