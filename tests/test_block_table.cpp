// Paged block tables (a kvcanary addition): on seeded random inputs, every op that reads
// PlanInputs must produce byte-identical results from a block table and from the req_to_token it
// describes (slot = block_table[row, position / block_size] * block_size + position % block_size).
// The per-token reference runs on the CPU; the block table runs on the test's backend, so the CUDA
// instance checks CUDA against the CPU and the block table against the per-token table at once.
// Covered: Plan (full and offsets-only), PlanOffsets + PlanEntries, Verify, FusedVerify (records
// partly corrupt, so rows are recorded) and Write; int32 and int64 block tables; block sizes 1, 16
// and non-powers of two; padding rows, clamped rows and positions, SWA tables, token pools, block
// ids outside the pool, and sampled verify (K in [2, 16], phases or none) in a third of the cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend_runner.h"
#include "kvcanary/kvcanary.h"
#include "plan_args.h"
#include "property_plan_oracle.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int64_t kBlockSizes[] = {1, 16, 3, 7, 2};
constexpr int64_t kRingCapacity = 4096;

// A random block table, its int32/int64 storage (a row view when padded) and the req_to_token it
// describes.
struct PagedTable {
  int64_t block_size = 1;
  bool wide = false;
  int64_t rows = 0;
  int64_t max_blocks = 0;
  int64_t pad = 0;
  HostTensor<int32_t> ids32, per_token;
  HostTensor<int64_t> ids64;

  int64_t width() const { return max_blocks * block_size; }
  TensorView BlockTable() const {
    const std::vector<int64_t> shape = {rows, max_blocks};
    const std::vector<int64_t> strides = {max_blocks + pad, 1};
    return wide ? ids64.view(shape, strides) : ids32.view(shape, strides);
  }
};

// Block ids mostly inside a pool of `num_blocks` blocks; some are -1 or past the pool, which the
// ops must read exactly as the slots the equivalent req_to_token holds.
int64_t RandomBlockId(Rng& rng, int64_t num_blocks) {
  const int64_t kind = rng.Uniform(0, 19);
  if (kind == 0) return -1;
  if (kind == 1) return num_blocks + rng.Uniform(0, 2);
  return rng.Uniform(0, num_blocks - 1);
}

PagedTable RandomTable(Rng& rng, int64_t block_size, int64_t num_blocks) {
  PagedTable t;
  t.block_size = block_size;
  t.wide = rng.Chance(0.5);
  t.rows = rng.Uniform(1, 6);
  t.max_blocks = rng.Uniform(1, 6);
  t.pad = rng.Chance(0.3) ? rng.Uniform(1, 3) : 0;
  const int64_t cells = t.rows * (t.max_blocks + t.pad);
  t.ids32 = HostTensor<int32_t>({cells}, -7);
  t.ids64 = HostTensor<int64_t>({cells}, -7);
  t.per_token = HostTensor<int32_t>({t.rows, t.width()});
  for (int64_t r = 0; r < t.rows; ++r) {
    for (int64_t b = 0; b < t.max_blocks; ++b) {
      const int64_t id = RandomBlockId(rng, num_blocks);
      t.ids32[r * (t.max_blocks + t.pad) + b] = static_cast<int32_t>(id);
      t.ids64[r * (t.max_blocks + t.pad) + b] = id;
      for (int64_t o = 0; o < block_size; ++o) {
        t.per_token.at(r, b * block_size + o) = static_cast<int32_t>(id * block_size + o);
      }
    }
  }
  return t;
}

// One forward over a random table: the batch, an optional SWA table and token pool, and the
// tokens it writes.
struct Forward {
  std::vector<int64_t> rp, prefix, extend, lut, valid_lens;
  int64_t window = 0;
  int64_t sample = 1;           // sampled verify's K
  std::vector<int64_t> phases;  // its verify_phase (empty: absent)
  std::optional<HostTensor<int32_t>> pool;
  int64_t tokens() const {
    int64_t n = 0;
    for (int64_t e : extend) n += e;
    return n;
  }
};

Forward RandomForward(Rng& rng, const PagedTable& t, int64_t num_slots) {
  Forward f;
  const int64_t bs = rng.Uniform(0, 8);
  for (int64_t r = 0; r < bs; ++r) {
    f.rp.push_back(rng.Uniform(0, t.rows));  // 0 pads; `rows` reads the clamped last row
    f.prefix.push_back(rng.Chance(0.05) ? -2 : rng.Uniform(0, t.width() + 2));
    f.extend.push_back(rng.Uniform(0, 3));
  }
  if (rng.Chance(0.3)) {
    f.window = rng.Uniform(1, 12);
    f.lut.resize(num_slots + 1);  // the full pool and its padding entry
    for (int64_t& slot : f.lut) slot = rng.Uniform(-1, num_slots + 2);
  }
  if (rng.Chance(0.5)) {
    f.pool.emplace(std::vector<int64_t>{t.rows + 1, t.width() + 1});
    for (int32_t& token : f.pool->values()) token = static_cast<int32_t>(rng.Uniform(0, 9));
    for (int64_t r = 0; r < bs; ++r) f.valid_lens.push_back(rng.Uniform(0, t.width() + 2));
  }
  return f;
}

// Writes each table row's chain into `state`, then flips a few record bytes.
void FillRecords(Rng& rng, const PagedTable& t, const Forward& f, CanaryState& state) {
  const int64_t num_slots = state.canary.shape()[0];
  for (int64_t r = 0; r < t.rows; ++r) {
    uint64_t running = ChainHeadHash();
    for (int64_t p = 0; p < t.width(); ++p) {
      const int64_t slot = Tr(f.lut, t.per_token[r * t.width() + p]);
      if (slot < 0 || slot >= num_slots) continue;
      const int64_t token = rng.Uniform(0, 9);
      state.set_record(slot, Record{token, p, static_cast<int64_t>(running), 0});
      running = ChainStep(running, token, p);
    }
  }
  for (int64_t flips = rng.Uniform(1, 4); flips > 0; --flips) {
    const int64_t slot = rng.Uniform(0, num_slots - 1);
    state.canary.values()[slot * state.canary.shape()[1] + rng.Uniform(0, 23)] ^= 0x10;
  }
}

// The tensors of one forward, with the table given either way.
class ForwardTensors {
 public:
  ForwardTensors(const PagedTable& t, const Forward& f)
      : t_(t),
        f_(f),
        rp_(HostTensor<int64_t>::Of(f.rp)),
        prefix_(HostTensor<int64_t>::Of(f.prefix)),
        extend_(HostTensor<int64_t>::Of(f.extend)),
        lut_(HostTensor<int64_t>::Of(f.lut)),
        valid_lens_(HostTensor<int64_t>::Of(f.valid_lens)),
        phases_(HostTensor<int64_t>::Of(f.phases)) {}

  ::kvcanary::PlanInputs Inputs(bool paged) const {
    ::kvcanary::PlanInputs in = BatchInputs(rp_.view(), prefix_.view(), extend_.view(),
                                            paged ? TensorView() : t_.per_token.view());
    if (paged) {
      in.block_table = t_.BlockTable();
      in.block_size = t_.block_size;
    }
    in.swa_window_size = f_.window;
    in.verify_sample = f_.sample;
    if (!f_.phases.empty()) in.verify_phase = phases_.view();
    if (!f_.lut.empty()) in.full_to_swa_index_mapping = lut_.view();
    if (f_.pool.has_value()) {
      in.req_to_verify_expected_tokens = f_.pool->view();
      in.req_to_verify_expected_tokens_valid_lens = valid_lens_.view();
    }
    return in;
  }

 private:
  const PagedTable& t_;
  const Forward& f_;
  HostTensor<int64_t> rp_, prefix_, extend_, lut_, valid_lens_, phases_;
};

// Everything one layout's run produces.
struct Results {
  explicit Results(int64_t capacity, int64_t bs, const CanaryState& records)
      : full(SentinelBuffers(capacity, std::max<int64_t>(bs, 1))),
        offsets_only(SentinelBuffers(1, std::max<int64_t>(bs, 1))),
        staged(SentinelBuffers(capacity, std::max<int64_t>(bs, 1))),
        scratch({bs + 1}, kSentinel),
        staged_scratch({std::max(kPlanOffsetsScratchMinLength, bs + 1)}, kSentinel),
        verified(records),
        fused(records),
        written(records) {}
  PlanBuffers full, offsets_only, staged;
  HostTensor<int64_t> scratch, staged_scratch;
  CanaryState verified, fused, written;
};

void RunLayout(BackendRunner& runner, const ::kvcanary::PlanInputs& in, int64_t capacity,
               bool check_token, const HostTensor<int64_t>& tokens,
               const HostTensor<int64_t>& positions, const HostTensor<int64_t>& locations,
               Results& out) {
  PlanArgs plan{.inputs = in,
                .verify_plan_out = out.full.verify(),
                .write_plan_out = out.full.write(),
                .verify_capacity = capacity};
  runner.Plan(plan);
  runner.Verify({.context = out.verified.Context(),
                 .plan = out.full.verify(),
                 .check_verify_expected_token = check_token});
  runner.Write(WriteCall(out.written.Context(), out.full.write(), tokens.view(), positions.view(),
                         locations.view()));

  const PlanBuffers& counts = out.offsets_only;
  plan.verify_plan_out =
      VerifyPlanView{{}, {}, {}, {}, counts.num_valid.view(), counts.enable.view()};
  plan.write_plan_out = counts.write();
  plan.verify_offsets_scratch = out.scratch.view();
  runner.Plan(plan);
  runner.FusedVerify({.context = out.fused.Context(),
                      .check_verify_expected_token = check_token,
                      .inputs = in,
                      .verify_offsets_scratch = out.scratch.view(),
                      .verify_num_valid = counts.num_valid.view(),
                      .verify_enable = counts.enable.view(),
                      .verify_capacity = capacity});

  PlanOffsetsArgs offsets{.inputs = in, .verify_capacity = capacity};
  SetPlanOffsetsOutputs(offsets, out.staged, out.staged_scratch);
  runner.PlanOffsets(offsets);
  runner.PlanEntries({.inputs = in,
                      .verify_offsets_scratch = out.staged_scratch.view(),
                      .verify_enable = out.staged.enable.view(),
                      .out_verify_slot_indices = out.staged.slots.view(),
                      .out_verify_expected_tokens = out.staged.tokens.view(),
                      .out_verify_expected_positions = out.staged.positions.view(),
                      .out_verify_prev_slot_indices = out.staged.prevs.view()});
}

void ExpectSamePlan(const PlanBuffers& a, const PlanBuffers& b) {
  EXPECT_EQ(b.slots.values(), a.slots.values());
  EXPECT_EQ(b.tokens.values(), a.tokens.values());
  EXPECT_EQ(b.positions.values(), a.positions.values());
  EXPECT_EQ(b.prevs.values(), a.prevs.values());
  EXPECT_EQ(b.num_valid.values(), a.num_valid.values());
  EXPECT_EQ(b.enable.values(), a.enable.values());
  EXPECT_EQ(b.offsets.values(), a.offsets.values());
  EXPECT_EQ(b.seeds.values(), a.seeds.values());
  EXPECT_EQ(b.num_valid_reqs.values(), a.num_valid_reqs.values());
}

void ExpectSameState(const BackendRunner& runner, const CanaryState& a, const CanaryState& b) {
  EXPECT_EQ(b.canary.values(), a.canary.values());
  // Past the ring's capacity a CUDA launch keeps whichever rows reserved first: only the count
  // (the write index below) is deterministic then.
  if (a.write_index[0] <= kRingCapacity) {
    EXPECT_EQ(runner.InLaunchOrder(b.rows()), runner.InLaunchOrder(a.rows()));
  }
  EXPECT_EQ(b.write_index[0], a.write_index[0]);
  EXPECT_EQ(b.slot_run_counter[0], a.slot_run_counter[0]);
  EXPECT_EQ(b.kernel_run_counter[0], a.kernel_run_counter[0]);
}

// The tokens a forward writes: random ids at each row's next positions, into random slots (some
// skipped with -1).
struct WriteTokens {
  WriteTokens(Rng& rng, const Forward& f, int64_t num_slots)
      : tokens({f.tokens()}), positions({f.tokens()}), locations({f.tokens()}) {
    // Distinct slots (some skipped with -1): two tokens written to one slot race on CUDA, which
    // no valid forward does.
    std::vector<int64_t> free_slots(num_slots);
    for (int64_t slot = 0; slot < num_slots; ++slot) free_slots[slot] = slot;
    rng.Shuffle(free_slots);
    int64_t i = 0;
    for (size_t r = 0; r < f.rp.size(); ++r) {
      for (int64_t k = 0; k < f.extend[r]; ++k, ++i) {
        tokens[i] = rng.Uniform(0, 9);
        positions[i] = std::max<int64_t>(f.prefix[r], 0) + k;
        locations[i] = i < num_slots && !rng.Chance(0.1) ? free_slots[i] : -1;
      }
    }
  }
  HostTensor<int64_t> tokens, positions, locations;
};

class BlockTable : public BackendTest {};

TEST_P(BlockTable, EveryOpReadsItAsTheReqToTokenItDescribes) {
  BackendRunner cpu(TestBackend::kCpu);
  int64_t rows_seen = 0, entries_seen = 0, wide_seen = 0;
  for (uint64_t seed = 1; seed <= 250; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    const int64_t block_size = kBlockSizes[seed % std::size(kBlockSizes)];
    const int64_t num_slots = rng.Uniform(2, 24) * block_size;
    const PagedTable table = RandomTable(rng, block_size, num_slots / block_size);
    Forward forward = RandomForward(rng, table, num_slots);
    if (seed % 3 == 0) {  // sampled verify, from its own stream: the other cases stay as they were
      Rng sampling(seed + 7000);
      forward.sample = sampling.Uniform(2, 16);
      for (int64_t n = sampling.Uniform(0, 4); n > 0; --n) {
        forward.phases.push_back(sampling.Uniform(-20, 20));
      }
    }
    CanaryState records(num_slots, kRingCapacity);
    FillRecords(rng, table, forward, records);
    const int64_t bs = static_cast<int64_t>(forward.rp.size());
    const int64_t capacity = rng.Chance(0.15) ? rng.Uniform(0, 4) : bs * (table.width() + 2) + 1;
    const bool check_token = rng.Chance(0.5);
    const WriteTokens write(rng, forward, num_slots);
    const ForwardTensors tensors(table, forward);

    Results per_token(capacity, bs, records);
    Results paged(capacity, bs, records);
    RunLayout(cpu, tensors.Inputs(false), capacity, check_token, write.tokens, write.positions,
              write.locations, per_token);
    RunLayout(backend, tensors.Inputs(true), capacity, check_token, write.tokens, write.positions,
              write.locations, paged);

    ExpectSamePlan(per_token.full, paged.full);
    ExpectSamePlan(per_token.offsets_only, paged.offsets_only);
    ExpectSamePlan(per_token.staged, paged.staged);
    EXPECT_EQ(paged.scratch.values(), per_token.scratch.values());
    EXPECT_EQ(paged.staged_scratch.values(), per_token.staged_scratch.values());
    ExpectSameState(backend, per_token.verified, paged.verified);
    ExpectSameState(backend, per_token.fused, paged.fused);
    ExpectSameState(backend, per_token.written, paged.written);
    rows_seen += per_token.fused.write_index[0];
    entries_seen += per_token.fused.slot_run_counter[0];
    wide_seen += table.wide ? 1 : 0;
  }
  // The seeds reach what the test is for: entries checked, violations recorded, both id widths.
  EXPECT_GT(rows_seen, 100);
  EXPECT_GT(entries_seen, 1000);
  EXPECT_GT(wide_seen, 50);
}

KVC_ON_EVERY_BACKEND(BlockTable);

// FusedVerify's own block-table checks (the plan ops' are rows of their validation tables): the
// table choice, and a block size that tiles the pool the table addresses. A refused call changes
// no record, ring row or counter.
class FusedVerifyBlockTable : public ::testing::Test {
 protected:
  FusedVerifyBlockTable() {
    args_ = {.context = state_.Context(),
             .inputs = BatchInputs(rp_.view(), prefix_.view(), TensorView(), TensorView()),
             .verify_offsets_scratch = scratch_.view(),
             .verify_num_valid = num_valid_.view(),
             .verify_enable = enable_.view(),
             .verify_capacity = 4};
    args_.inputs.block_table = blocks_.view();
    args_.inputs.block_size = 4;
  }

  void ExpectRejected(const std::string& message) {
    ByteSnapshot outputs(state_.canary, state_.ring, state_.write_index, state_.slot_run_counter,
                         state_.kernel_run_counter);
    EXPECT_KVC_ERROR(FusedVerify(args_), message);
    EXPECT_TRUE(outputs.Unchanged());
  }

  CanaryState state_{12};  // three blocks of 4
  HostTensor<int64_t> rp_{{2}, 1}, prefix_{{2}, 2}, scratch_ = HostTensor<int64_t>::Of({0, 2, 4});
  HostTensor<int32_t> num_valid_{{1}, 4}, enable_{{1}, 1};
  HostTensor<int64_t> blocks_{{2, 2}, 1};
  HostTensor<int64_t> lut_{{13}, 1};
  HostTensor<int32_t> table_{{2, 8}, 5};
  FusedVerifyArgs args_;
};

TEST_F(FusedVerifyBlockTable, AValidCallChecksTheEntries) {
  FusedVerify(args_);
  EXPECT_EQ(state_.slot_run_counter[0], 4);
  EXPECT_EQ(state_.kernel_run_counter[0], 1);
  EXPECT_GT(state_.write_index[0], 0);  // zeroed records mismatch
}

TEST_F(FusedVerifyBlockTable, ExactlyOneTable) {
  args_.inputs.req_to_token = table_.view();
  ExpectRejected("kv-canary: req_to_token or block_table is required, not both");
  args_.inputs.block_table = TensorView();
  ExpectRejected("kv-canary: block_size must be 1 with req_to_token, got 4");
  args_.inputs.req_to_token = TensorView();
  ExpectRejected("kv-canary: req_to_token or block_table is required, got neither");
}

TEST_F(FusedVerifyBlockTable, BlockSizeInRange) {
  args_.inputs.block_size = 0;
  ExpectRejected("kv-canary: block_size must be in [1, 1048576], got 0");
}

TEST_F(FusedVerifyBlockTable, BlockSizeDividesTheCanarySlots) {
  args_.inputs.block_size = 5;
  ExpectRejected("kv-canary: block_size must divide canary_buf's num_slots=12, got block_size=5");
}

TEST_F(FusedVerifyBlockTable, WithAnSwaTableBlockSizeDividesTheFullPool) {
  args_.inputs.full_to_swa_index_mapping = lut_.view();  // a full pool of 12 slots
  args_.inputs.block_size = 6;
  FusedVerify(args_);
  args_.inputs.full_to_swa_index_mapping = lut_.view({9});
  ExpectRejected(
      "kv-canary: block_size must divide the full pool full_to_swa_index_mapping maps (its "
      "length - 1 = 8), got block_size=6");
}

}  // namespace
}  // namespace kvcanary::testing
