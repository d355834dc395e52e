// The step protocol end to end over a fake engine (tests/runtime/fake_engine.h): a clean run
// reports nothing, each corruption is reported with the right tag and reason one step later,
// split verification still catches it, raise mode throws, metrics and the sidecar work.
#include "kvcanary/runtime/canary_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "kvcanary/error.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_engine.h"
#include "text_lines.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

struct Seen {
  std::vector<ViolationRow> rows;
  std::vector<int64_t> steps;
};

void Listen(FakeEngine& engine, Seen& seen) {
  engine.canary->SetViolationListener([&seen](const ViolationRow& row, int64_t step) {
    seen.rows.push_back(row);
    seen.steps.push_back(step);
  });
}

TEST(CanaryManager, ModeNoneInstallsNothing) {
  FakeEngineOptions options;
  FakeEngine engine(options);
  EXPECT_EQ(engine.canary, nullptr);
}

TEST(CanaryManager, CleanRunReportsNothingAndCountsTokens) {
  FakeEngine engine(LogOptions());
  Seen seen;
  Listen(engine, seen);
  engine.AddRequest(20);
  engine.AddRequest(7);
  for (int i = 0; i < 30; ++i) engine.Step();
  EXPECT_TRUE(seen.rows.empty());
  const MetricsSnapshot metrics = engine.canary->Metrics();
  int64_t protected_tokens = 0;
  for (int64_t count : metrics.protected_tokens) protected_tokens += count;
  EXPECT_GT(protected_tokens, 0);
  // Verify and write each count a run; the counters trail by one step (staged, read next step).
  EXPECT_EQ(metrics.kernel_runs[static_cast<int>(CanaryLaunchTag::kTailVFull)], 2 * 29);
  EXPECT_EQ(engine.canary->outer_step(), 30);
  EXPECT_GT(engine.canary->device_bytes(), 4 * 512 * 32);
  EXPECT_TRUE(engine.log.Contains("install_canary:"));
}

TEST(CanaryManager, RemappedPrefixEntryIsReportedOneStepLate) {
  FakeEngine engine(LogOptions());
  Seen seen;
  Listen(engine, seen);
  const int64_t row = engine.AddRequest(10);
  engine.AddRequest(10);
  for (int i = 0; i < 3; ++i) engine.Step();
  // Position 4 of request 1 now points at a live slot of request 2.
  engine.SetSlot(row, 4, engine.SlotOf(2, 6));
  engine.Step();  // step 3: HEAD and TAIL verify see it
  EXPECT_TRUE(seen.rows.empty()) << "reported in the step it happened";
  engine.Step();  // step 4: the pump drains step 3's write index
  ASSERT_FALSE(seen.rows.empty());
  EXPECT_EQ(seen.steps.front(), 5);
  const ViolationRow& first = seen.rows.front();
  EXPECT_EQ(first.kernel_kind, static_cast<int64_t>(CanaryLaunchTag::kHeadKFull));
  EXPECT_TRUE(first.fail_reason_bits & FailReason::kVerifyPositionMismatch);
  EXPECT_TRUE(engine.log.Contains("kv_canary violation: launch_tag=HEAD_K_FULL"));
}

TEST(CanaryManager, FlippedKvByteIsCaughtByTailRealKvHash) {
  FakeEngine engine(LogOptions());
  Seen seen;
  Listen(engine, seen);
  engine.AddRequest(12);
  for (int i = 0; i < 3; ++i) engine.Step();
  const int64_t slot = engine.SlotOf(1, 5);
  engine.FlipKByte(slot, 3);
  engine.Step();
  engine.Step();
  ASSERT_FALSE(seen.rows.empty());
  bool tail_real_kv = false;
  for (const ViolationRow& row : seen.rows) {
    if (row.kernel_kind == static_cast<int64_t>(CanaryLaunchTag::kTailKFull) &&
        (row.fail_reason_bits & FailReason::kVerifyRealKvHashMismatch) && row.slot_idx == slot) {
      tail_real_kv = true;
    }
    // HEAD records carry no fingerprint: only TAIL can see a byte flip.
    EXPECT_NE(row.kernel_kind, static_cast<int64_t>(CanaryLaunchTag::kHeadKFull));
  }
  EXPECT_TRUE(tail_real_kv);
}

TEST(CanaryManager, FlippedKvByteIsInvisibleWithoutRealData) {
  FakeEngine engine(LogOptions(RealKvHashMode::kNone));
  Seen seen;
  Listen(engine, seen);
  engine.AddRequest(12);
  for (int i = 0; i < 3; ++i) engine.Step();
  engine.FlipKByte(engine.SlotOf(1, 5), 3);
  for (int i = 0; i < 3; ++i) engine.Step();
  EXPECT_TRUE(seen.rows.empty());
}

TEST(CanaryManager, OverflowIsVerifiedInChunks) {
  FakeEngineOptions options = SmallPlanOptions();
  options.config.fused_verify = false;  // SGLang's plan arrays, which can overflow
  FakeEngine engine(options);
  Seen seen;
  Listen(engine, seen);
  FillPastThePlanCapacity(engine);
  EXPECT_TRUE(engine.log.Contains("verified outside the graph in"));
  EXPECT_TRUE(seen.rows.empty());
  EXPECT_FALSE(engine.log.Contains("verify skipped this step"));
  RemapAcrossRequestsAndReport(engine);
  ASSERT_FALSE(seen.rows.empty()) << "a step over capacity was not verified";
  EXPECT_GT(engine.canary->split_steps(), 0);
}

TEST(CanaryManager, FusedVerifyChecksAStepPastThePlanCapacityInTheGraph) {
  FakeEngine engine(SmallPlanOptions());
  Seen seen;
  Listen(engine, seen);
  FillPastThePlanCapacity(engine);
  EXPECT_TRUE(seen.rows.empty());
  RemapAcrossRequestsAndReport(engine);
  ASSERT_FALSE(seen.rows.empty()) << "a step past the plan capacity was not verified";
  EXPECT_EQ(engine.canary->split_steps(), 0);
  EXPECT_FALSE(engine.log.Contains("verified outside the graph in"));
  EXPECT_FALSE(engine.log.Contains("verify skipped this step"));
}

TEST(CanaryManager, RaiseModeThrowsOnceWithEveryMessage) {
  // Mode raise, and on_violation raise over mode log, raise alike.
  for (const bool mode_raise : {true, false}) {
    FakeEngineOptions options = LogOptions();
    if (mode_raise) options.config.mode = Mode::kRaise;
    if (!mode_raise) options.config.on_violation = OnViolation::kRaise;
    FakeEngine engine(options);
    const std::string message = RaiseOnARemappedPosition(engine);
    EXPECT_NE(message.find("kv_canary violation: launch_tag="), std::string::npos) << message;
    EXPECT_FALSE(engine.log.Contains("WARNING kv_canary violation"));
  }
}

TEST(CanaryManager, IncidentFileGetsOneJsonLinePerShownViolation) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("kvcanary_incidents_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream existing(path, std::ios::trunc);
    existing << "{\"earlier\":true}\n";
  }
  FakeEngineOptions options = LogOptions();
  options.config.incident_file = path.string();
  FakeEngine engine(options);
  Seen seen;
  Listen(engine, seen);
  engine.AddRequest(10);
  engine.AddRequest(10);
  for (int i = 0; i < 3; ++i) engine.Step();
  engine.SetSlot(1, 4, engine.SlotOf(2, 6));
  engine.Step();
  engine.Step();
  ASSERT_FALSE(seen.rows.empty());

  std::ifstream in(path);
  const std::vector<std::string> lines = kvcanary::testing::Lines(in);
  std::filesystem::remove(path);
  ASSERT_EQ(lines.size(), seen.rows.size() + 1);
  EXPECT_EQ(lines[0], "{\"earlier\":true}") << "the file is appended to, never truncated";
  for (size_t i = 0; i < seen.rows.size(); ++i) {
    EXPECT_EQ(lines[i + 1], FormatIncidentJson(seen.rows[i], seen.steps[i]));
  }
  EXPECT_NE(lines[1].find("\"step\":5,\"launch_tag\":\"HEAD_K_FULL\""), std::string::npos)
      << lines[1];
}

// A file that passed the install check and then fails every write (/dev/full: a full disk).
TEST(CanaryManager, UnwritableIncidentFileWarnsAndKeepsReporting) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  FakeEngineOptions options = LogOptions();
  options.config.incident_file = "/dev/full";
  FakeEngine engine(options);
  Seen seen;
  Listen(engine, seen);
  RemapWithinARequest(engine);
  engine.Step();
  ASSERT_FALSE(seen.rows.empty());
  EXPECT_TRUE(engine.log.Contains("WARNING kv-canary: could not append"));
  EXPECT_TRUE(engine.log.Contains("'/dev/full': No space left on device (failure 1;"));
  EXPECT_TRUE(engine.log.Contains("WARNING kv_canary violation: launch_tag="));
}

TEST(CanaryManager, WorkspaceStaysBelowTenPercentOfTheRecords) {
  // SGLang sizes the verify plan at 3 x pool slots (75% of MHA record memory); kvcanary caps the
  // per-step workspace at 10% of the records and verifies in chunks when a step needs more.
  FakeEngineOptions options = LogOptions();
  options.num_slots = 200000;
  FakeEngine engine(options);
  const int64_t records = engine.canary->record_bytes();
  EXPECT_EQ(records, 4 * 32 * 200000);
  const int64_t state = 1024 * 64 + 4 + 2 * 8 * 12 + 4;  // ring, write index, counters, flag
  const int64_t workspace = engine.canary->device_bytes() - records - state;
  EXPECT_GT(workspace, 0);
  EXPECT_LT(workspace, records / 10);
  EXPECT_LT(engine.canary->capacities().verify_capacity, 3 * 200000);
  EXPECT_GE(engine.canary->capacities().verify_capacity, 128);  // the longest row still fits
}

TEST(CanaryManager, FusedVerifyWorkspaceDoesNotGrowWithThePool) {
  // With fused verify no per-step array is sized by the pool: ten times the slots, the same
  // workspace (the sweep's chunk is capped, the forwards' plans hold only their counts).
  auto workspace = [](int64_t num_slots) {
    FakeEngineOptions options = LogOptions();
    options.num_slots = num_slots;
    FakeEngine engine(options);
    const int64_t state = 1024 * 64 + 4 + 2 * 8 * 12 + 4;
    return engine.canary->device_bytes() - engine.canary->record_bytes() - state;
  };
  const int64_t small = workspace(300000);
  EXPECT_GT(small, 0);
  EXPECT_EQ(workspace(3000000), small);
}

TEST(CanaryManager, PhaseOrderIsChecked) {
  FakeEngine engine(LogOptions());
  EXPECT_THROW(engine.canary->PreForward(0), Error);
}

// A rejected BeginStep (here: a prefix past the table's width) changes nothing: the same forward
// can begin again, and a valid step then runs clean.
TEST(CanaryManager, RejectedBeginStepLeavesThePhaseIdle) {
  FakeEngine engine(LogOptions());
  Seen seen;
  Listen(engine, seen);
  engine.AddRequest(3);
  engine.Step();
  StepInput bad;
  bad.forwards = {ForwardBatch{}};
  ForwardHostInput host;
  host.req_pool_indices = {1};
  host.prefix_lens = {int64_t{1} << 30};
  bad.host = {host};
  EXPECT_THROW(engine.canary->BeginStep(bad), Error);
  EXPECT_THROW(engine.canary->PreForward(0), Error);  // nothing began
  engine.Step();
  engine.Step();
  EXPECT_EQ(engine.canary->outer_step(), 3);
  EXPECT_TRUE(seen.rows.empty());
}

TEST(CanaryManager, ReplayedForwardAdvancesThePhaseLikeTheTwoHooks) {
  FakeEngine engine(LogOptions());
  engine.AddRequest(3);
  engine.Step();
  // An empty batch: a replay launches nothing from the host, so no tensor is read.
  StepInput input;
  input.forwards = {ForwardBatch{}};
  input.host = {ForwardHostInput{}};
  const std::regex mismatch("kv-canary: per-forward phase mismatch .* expected AFTER_PRE_MAYBE_IN "
                            "before transitioning to AFTER_POST_MAYBE_IN");
  engine.canary->BeginStep(input);
  engine.canary->ReplayedForward(0);
  try {
    engine.canary->PostForward(0);
    FAIL() << "PostForward after a replay passed the phase checker";
  } catch (const Error& error) {
    EXPECT_TRUE(std::regex_search(error.what(), mismatch)) << error.what();
  }
  EXPECT_NO_THROW(engine.canary->EndStep());
  EXPECT_EQ(engine.canary->outer_step(), 2);
  engine.canary->BeginStep(input);
  engine.canary->ReplayedForward(0);
  EXPECT_THROW(engine.canary->ReplayedForward(0), Error);
}

TEST(CanaryManager, PrometheusTextHasEveryTag) {
  FakeEngine engine(LogOptions());
  engine.AddRequest(5);
  for (int i = 0; i < 4; ++i) engine.Step();
  const std::string text = engine.canary->PrometheusText();
  EXPECT_NE(text.find("launch_tag=\"TAIL_K_FULL\""), std::string::npos);
  // Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]* (kvcanary_l3_... has a digit).
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9]+$)");
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    samples += 1;
  }
  EXPECT_GT(samples, 12);
}

TEST(CanaryManager, BackupAndRestoreCarryRecords) {
  FakeEngine engine(LogOptions());
  engine.AddRequest(6);
  for (int i = 0; i < 2; ++i) engine.Step();
  const TensorView tail = engine.canary->CanaryBuffer(GroupKind::kFull, true, false);
  const uint8_t* records = tail.data_as<uint8_t>();
  std::vector<uint8_t> original(records + 3 * 32, records + 4 * 32);
  engine.canary->BackupRecords(GroupKind::kFull, {11}, {3});
  std::memset(tail.data_as<uint8_t>() + 6 * 32, 0, 32);
  engine.canary->RestoreRecords(GroupKind::kFull, {11}, {6});
  EXPECT_EQ(std::vector<uint8_t>(records + 6 * 32, records + 7 * 32), original);
  EXPECT_THROW(engine.canary->BackupRecords(GroupKind::kFull, {64}, {3}), Error);
  EXPECT_THROW(engine.canary->BackupRecords(GroupKind::kSwa, {1}, {3}), Error);
}

TEST(CanaryManager, SpliceOrdersKAndVHalves) {
  FakeEngine engine(LogOptions());
  std::vector<CanaryManager::BufferInfo> list = {{nullptr, 1, 1}, {nullptr, 2, 2}};
  engine.canary->SpliceBufInfo(GroupKind::kFull, list, 1);
  ASSERT_EQ(list.size(), 6u);
  EXPECT_EQ(list[0].data, engine.canary->CanaryBuffer(GroupKind::kFull, false, false).data());
  EXPECT_EQ(list[1].bytes, 1);
  EXPECT_EQ(list[2].data, engine.canary->CanaryBuffer(GroupKind::kFull, true, false).data());
  EXPECT_EQ(list[3].data, engine.canary->CanaryBuffer(GroupKind::kFull, false, true).data());
  EXPECT_EQ(list[4].bytes, 2);
  EXPECT_EQ(list[5].data, engine.canary->CanaryBuffer(GroupKind::kFull, true, true).data());
  std::vector<CanaryManager::BufferInfo> odd(3);
  EXPECT_THROW(engine.canary->SpliceBufInfo(GroupKind::kFull, odd, 1), Error);
}

}  // namespace
}  // namespace kvcanary::runtime
