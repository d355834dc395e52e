// The runtime over a paged block table: the same rows and counters as over the equivalent
// req_to_token, the install and step refusals of the block-table arguments (each leaves the
// runtime as it was), and real-KV fingerprints over several layers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/engine_scenarios.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/install_case.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::PreparedStep;

constexpr int64_t kBlockSize = 4;

FakeEngineOptions PagedOptions(bool block_table) {
  FakeEngineOptions options = LogOptions(RealKvHashMode::kAll);
  options.block_size = kBlockSize;
  options.block_table = block_table;
  return options;
}

// Three requests, a few steps, then block 1 of request 1 swapped with a block of request 2 and a
// K byte flipped in request 3; returns every reported row.
std::vector<ViolationRow> RunCorruptedScenario(FakeEngine& engine) {
  std::vector<ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const ViolationRow& row, int64_t) { rows.push_back(row); });
  for (int64_t prompt : {10, 13, 6}) engine.AddRequest(prompt);
  for (int i = 0; i < 3; ++i) engine.Step();
  const int64_t block_a = engine.BlockOf(1, 1);
  engine.SetBlock(1, 1, engine.BlockOf(2, 2));
  engine.SetBlock(2, 2, block_a);
  engine.FlipKByte(engine.SlotOf(3, 2), 5);
  for (int i = 0; i < 3; ++i) engine.Step();
  return rows;
}

bool SameRow(const ViolationRow& a, const ViolationRow& b) {
  return a.kernel_kind == b.kernel_kind && a.slot_idx == b.slot_idx && a.position == b.position &&
         a.stored_token == b.stored_token && a.expected_token == b.expected_token &&
         a.stored_chain_hash == b.stored_chain_hash && a.expected_aux == b.expected_aux &&
         a.fail_reason_bits == b.fail_reason_bits;
}

TEST(BlockTableRuntime, SameRowsAndCountersAsTheEquivalentReqToToken) {
  FakeEngine per_token(PagedOptions(/*block_table=*/false));
  FakeEngine paged(PagedOptions(/*block_table=*/true));
  const std::vector<ViolationRow> expected = RunCorruptedScenario(per_token);
  const std::vector<ViolationRow> got = RunCorruptedScenario(paged);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(SameRow(got[i], expected[i])) << i;
  const MetricsSnapshot a = per_token.canary->Metrics();
  const MetricsSnapshot b = paged.canary->Metrics();
  EXPECT_EQ(a.kernel_runs, b.kernel_runs);
  EXPECT_EQ(a.protected_tokens, b.protected_tokens);
  EXPECT_EQ(a.violations_by_tag, b.violations_by_tag);
  EXPECT_EQ(a.violations_total, b.violations_total);
}

TEST(BlockTableRuntime, CleanRunReportsNothing) {
  FakeEngine engine(PagedOptions(/*block_table=*/true));
  std::vector<ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const ViolationRow& row, int64_t) { rows.push_back(row); });
  for (int64_t prompt : {9, 16, 3}) engine.AddRequest(prompt);
  for (int i = 0; i < 12; ++i) engine.Step();
  EXPECT_TRUE(rows.empty());
  EXPECT_GT(engine.canary->Metrics().protected_tokens[0], 0);
}

// Turns an InstallCase into a 4-block table of blocks of 4 slots instead of req_to_token (in
// place: the case's arguments point at its own members).
void MakePaged(InstallCase& c) {
  c.args.req_to_token = TensorView();
  c.args.block_table = c.table.View(DType::kInt32, {4, 4});
  c.args.block_size = 4;
}

// One refused install: a change to the paged (or per-token) case and the message it gives.
struct TableRefusal {
  bool paged;
  void (*change)(InstallCase& c);
  const char* message;
};

const TableRefusal kTableRefusals[] = {
    {true, [](InstallCase& c) { c.args.block_table = TensorView(); },
     "kv-canary: install needs exactly one of req_to_token and block_table, got neither"},
    {true, [](InstallCase& c) { c.args.req_to_token = c.table.View(DType::kInt32, {4, 8}); },
     "kv-canary: install needs exactly one of req_to_token and block_table, got both"},
    {true, [](InstallCase& c) { c.args.block_size = 0; },
     "kv-canary: block_size must be in [1, 1048576], got 0"},
    {true, [](InstallCase& c) { c.args.block_size = 3; },
     "kv-canary: block_size=3 must divide pool_slot_count=64 (the pool is whole blocks)"},
    {true, [](InstallCase& c) { c.args.block_table = c.table.View(DType::kUInt8, {4, 4}); },
     "kv-canary: block_table must be a 2-D int32 or int64 tensor, got 2-D torch.uint8"},
    {false, [](InstallCase& c) { c.args.block_size = 16; },
     "kv-canary: block_size must be 1 with req_to_token (a per-token table), got 16"},
};

TEST(BlockTableRuntime, InstallRefusesABadTableWithNothingAllocated) {
  for (const Device device : Devices()) {
    for (const TableRefusal& refusal : kTableRefusals) {
      InstallCase c(device);
      if (refusal.paged) MakePaged(c);
      refusal.change(c);
      EXPECT_EQ(c.Refusal(), refusal.message);
    }
  }
}

TEST(BlockTableRuntime, AnInt64BlockTableInstalls) {
  InstallCase c(Device::CPU());
  MakePaged(c);
  c.args.block_table = c.table.View(DType::kInt64, {2, 4});
  EXPECT_NE(CanaryManager::Install(c.config, c.args), nullptr);
}

// Each refused step leaves the runtime as it was: nothing began, and the next valid step runs
// clean with the step counter where it was.
TEST(BlockTableRuntime, BeginStepRefusesBadHostBlocksAndChangesNothing) {
  FakeEngine engine(PagedOptions(/*block_table=*/true));
  std::vector<ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const ViolationRow& row, int64_t) { rows.push_back(row); });
  engine.AddRequest(6);
  engine.Step();
  const std::string too_many = "kv-canary: host block_ids must hold the 2 blocks the batch's "
                               "lengths need, got 3";
  const std::string outside = "kv-canary: host block_ids[1]=128 is outside the pool's blocks "
                              "[0, 128)";
  const std::string too_long = "kv-canary: batch row 0 needs 129 positions but block_table holds "
                               "128 (32 blocks of 4)";
  for (const std::string& expected : {too_many, outside, too_long}) {
    const PreparedStep step = engine.PrepareStep();
    StepInput bad = step.input;
    ForwardHostInput& host = bad.host[0];
    if (expected == too_many) host.block_ids.push_back(1);
    if (expected == outside) host.block_ids[1] = 128;
    if (expected == too_long) host.extend_seq_lens[0] = 129 - host.prefix_lens[0];
    EXPECT_EQ(ErrorMessage([&] { engine.canary->BeginStep(bad); }), expected);
    EXPECT_THROW(engine.canary->PreForward(0), Error);  // nothing began
    // The good step the engine prepared still runs.
    engine.canary->BeginStep(step.input);
    engine.canary->PreForward(0);
    engine.WriteKv(step);
    engine.canary->PostForward(0);
    engine.canary->EndStep();
  }
  engine.Step();
  EXPECT_EQ(engine.canary->outer_step(), 5);
  EXPECT_TRUE(rows.empty());
}

TEST(BlockTableRuntime, ForwardOverrideOfTheOtherKindIsRefused) {
  FakeEngine engine(PagedOptions(/*block_table=*/true));
  engine.AddRequest(5);
  const PreparedStep step = engine.PrepareStep();
  StepInput bad = step.input;
  bad.forwards[0].req_to_token = engine.KLayer0();
  EXPECT_EQ(ErrorMessage([&] { engine.canary->BeginStep(bad); }),
            "kv-canary: forward_batch.req_to_token given, but the runtime was installed with "
            "block_table; pass that kind");
  FakeEngine per_token(LogOptions());
  per_token.AddRequest(5);
  StepInput per_token_step = per_token.PrepareStep().input;
  per_token_step.host[0].block_ids = {1, 2};
  EXPECT_EQ(ErrorMessage([&] { per_token.canary->BeginStep(per_token_step); }),
            "kv-canary: host block_ids given, but the runtime was installed with req_to_token "
            "(per-token slots, no blocks)");
}

// A byte flipped in any listed layer changes the slot's fingerprint, not only in layer 0.
TEST(BlockTableRuntime, EveryListedLayerIsFingerprinted) {
  FakeEngineOptions options = PagedOptions(/*block_table=*/true);
  options.layers = 3;
  FakeEngine engine(options);
  std::vector<ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const ViolationRow& row, int64_t) { rows.push_back(row); });
  engine.AddRequest(9);
  for (int i = 0; i < 2; ++i) engine.Step();
  const int64_t slot = engine.SlotOf(1, 4);
  engine.FlipKByte(slot, 7, /*layer=*/2);
  for (int i = 0; i < 2; ++i) engine.Step();
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front().slot_idx, slot);
  EXPECT_TRUE(rows.front().fail_reason_bits & FailReason::kVerifyRealKvHashMismatch);
}

TEST(BlockTableRuntime, LayerListsAreChecked) {
  for (const Device device : Devices()) {
    {
      InstallCase c(device);
      c.config.real_data = RealKvHashMode::kAll;
      c.args.groups[0].k_layer0 = c.table.View(DType::kUInt8, {32, 16});
      c.args.groups[0].k_layers = {c.table.View(DType::kUInt8, {32, 16})};
      EXPECT_EQ(c.Refusal(),
                "kv-canary: group FULL k_layers and k_layer0 are both given; pass one");
    }
    {
      InstallCase c(device);
      c.args.groups[0].k_layers.assign(1025, c.table.View(DType::kUInt8, {32, 16}));
      EXPECT_EQ(c.Refusal(),
                "kv-canary: group FULL k_layers must hold at most 1024 layers, got 1025");
    }
    {
      InstallCase c(device);
      c.config.verify_backup = true;
      c.args.groups[0].k_layers.assign(2, c.table.View(DType::kUInt8, {32, 16}));
      EXPECT_EQ(c.Refusal(),
                "kv-canary: verify_backup re-hashes one host layer; group FULL k_layers has 2 "
                "(give one layer, or turn verify_backup off)");
    }
  }
}

}  // namespace
}  // namespace kvcanary::runtime
