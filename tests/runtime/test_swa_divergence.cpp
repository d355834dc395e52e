// The SWA divergence diagnostic (Config::swa_divergence_stats_interval): the counting over host
// copies, and the runtime's report every N outer steps over a fake hybrid SWA engine.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/engine_scenarios.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/swa_divergence.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

constexpr char kLinePrefix[] = "kv-canary: swa divergence: ";

// A slice of `words` int64 per item over items [0, items.size()).
HostSlice SliceOf(const std::vector<std::vector<int64_t>>& items, int64_t words) {
  HostSlice slice;
  slice.words = words;
  slice.count = static_cast<int64_t>(items.size());
  for (const std::vector<int64_t>& item : items) {
    slice.data.insert(slice.data.end(), item.begin(), item.end());
  }
  return slice;
}

// One row of 6 positions in full slots 1..6, window 3: positions 0-2 before the window, 3-5 in it.
TEST(SwaDivergenceCount, CountsEachKindOfPosition) {
  // full slot -> SWA slot: 1 and 2 evicted, 3 still resident (before the window, not counted),
  // 4 identity, 5 -> SWA 2 (remapped, holding another token), 6 unmapped inside the window.
  const HostSlice lut = SliceOf({{0}, {0}, {0}, {3}, {4}, {2}, {0}}, 1);
  std::vector<std::vector<int64_t>> full(7, {0, 0, 0, 0});
  for (int64_t slot = 1; slot <= 6; ++slot) full[slot] = {100 + slot, slot - 1, 7, 7};
  std::vector<std::vector<int64_t>> swa(5, {0, 0, 0, 0});
  swa[4] = {104, 3, 9, 9};  // the token of full slot 4: hashes differ, token and position agree
  swa[2] = {999, 1, 9, 9};  // another token
  const SwaDivergenceCounts counts = CountSwaDivergence({{1, 2, 3, 4, 5, 6}}, /*window=*/3, lut,
                                                        SliceOf(full, 4), SliceOf(swa, 4));
  EXPECT_EQ(counts.rows, 1);
  EXPECT_EQ(counts.positions, 6);
  EXPECT_EQ(counts.window_positions, 3);
  EXPECT_EQ(counts.record_mismatches, 1);
  EXPECT_EQ(counts.unmapped_in_window, 1);
  EXPECT_EQ(counts.remapped, 1);
  EXPECT_EQ(counts.out_of_window, 2);
}

TEST(SwaDivergenceCount, AMappedSlotOutsideTheSwaPoolIsAMismatchAndPaddingIsSkipped) {
  const HostSlice lut = SliceOf({{0}, {9}}, 1);
  const HostSlice full = SliceOf({{0, 0, 0, 0}, {5, 0, 0, 0}}, 4);
  const SwaDivergenceCounts counts =
      CountSwaDivergence({{0, 1}}, /*window=*/4, lut, full, SliceOf({{0, 0, 0, 0}}, 4));
  EXPECT_EQ(counts.positions, 1);  // slot 0 is padding
  EXPECT_EQ(counts.record_mismatches, 1);
  EXPECT_EQ(FormatSwaDivergenceLine(4, counts),
            "kv-canary: swa divergence: step=4 rows=1 window_positions=1 record_mismatches=1 "
            "unmapped_in_window=0 remapped=1 out_of_window=0");
}

FakeEngineOptions SwaOptions(int64_t interval) {
  FakeEngineOptions options = LogOptions();
  options.swa_window = 4;
  options.swa_slots = 48;
  options.config.swa_divergence_stats_interval = interval;
  return options;
}

std::vector<std::string> ReportLines(const FakeEngine& engine) {
  std::vector<std::string> lines;
  for (const std::string& line : engine.log.lines) {
    if (line.find(kLinePrefix) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

TEST(SwaDivergence, ACleanRunReportsNoDivergenceAtEveryInterval) {
  FakeEngine engine(SwaOptions(/*interval=*/3));
  engine.AddRequest(6);
  engine.AddRequest(9);
  for (int i = 0; i < 20; ++i) engine.Step();
  const std::vector<std::string> lines = ReportLines(engine);
  ASSERT_EQ(lines.size(), 6u);  // steps 3, 6, ..., 18
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    EXPECT_EQ(lines[i].rfind(std::string("INFO ") + kLinePrefix, 0), 0u);
    EXPECT_NE(lines[i].find("step=" + std::to_string(3 * (i + 1)) +
                            " rows=2 window_positions=8 "
                            "record_mismatches=0 unmapped_in_window=0"),
              std::string::npos);
  }
  const MetricsSnapshot metrics = engine.canary->Metrics();
  EXPECT_EQ(metrics.swa_divergence_reports, 6);
  EXPECT_EQ(metrics.swa_record_mismatches, 0);
  EXPECT_EQ(metrics.swa_unmapped_in_window, 0);
  EXPECT_GT(metrics.swa_out_of_window, 0);  // the windows moved: evicted positions were seen
  EXPECT_GT(metrics.swa_remapped, 0);       // recycled SWA slots no longer match the full slots
  EXPECT_EQ(metrics.violations_total, 0);
  EXPECT_NE(engine.canary->PrometheusText().find("kvcanary_swa_divergence_reports_total 6\n"),
            std::string::npos);
}

// The swa_lut_stale bug: an in-window SWA slot of request 1 is freed while the table keeps
// pointing at it; a new request's prefill is handed that slot and writes its own token there.
TEST(SwaDivergence, AStaleMappingToAReusedSwaSlotIsCounted) {
  FakeEngine engine(SwaOptions(/*interval=*/1));
  engine.AddRequest(6);
  for (int i = 0; i < 4; ++i) engine.Step();
  EXPECT_EQ(engine.canary->Metrics().swa_record_mismatches, 0);
  const int64_t stale_full_slot = engine.SlotOf(1, 7);  // window of request 1: positions 6..9
  const int64_t freed = engine.swa->FreeKeepingStaleEntry(stale_full_slot);
  const int64_t other = engine.AddRequest(5);
  engine.Step();
  bool reused = false;
  for (int64_t pos = 0; pos < 5; ++pos) {
    reused |= engine.swa->SwaSlotOf(engine.SlotOf(other, pos)) == freed;
  }
  ASSERT_TRUE(reused);
  EXPECT_EQ(engine.swa->SwaSlotOf(stale_full_slot), freed);
  const MetricsSnapshot metrics = engine.canary->Metrics();
  EXPECT_GE(metrics.swa_record_mismatches, 1);
  EXPECT_NE(ReportLines(engine).back().find("step=5 rows=2"), std::string::npos);
  EXPECT_EQ(ReportLines(engine).back().find("record_mismatches=0"), std::string::npos);
  EXPECT_NE(engine.canary->PrometheusText().find("kvcanary_swa_record_mismatches " +
                                                 std::to_string(metrics.swa_record_mismatches)),
            std::string::npos);
}

TEST(SwaDivergence, IntervalZeroLogsNothing) {
  FakeEngine engine(SwaOptions(/*interval=*/0));
  engine.AddRequest(6);
  for (int i = 0; i < 8; ++i) engine.Step();
  EXPECT_TRUE(ReportLines(engine).empty());
  EXPECT_EQ(engine.canary->Metrics().swa_divergence_reports, 0);
}

TEST(SwaDivergence, AFullOnlyPoolReportsNothing) {
  FakeEngineOptions options = LogOptions();
  options.config.swa_divergence_stats_interval = 1;
  FakeEngine engine(options);
  engine.AddRequest(6);
  for (int i = 0; i < 3; ++i) engine.Step();
  EXPECT_TRUE(ReportLines(engine).empty());
}

// A negative interval is refused by name, before the runtime allocates anything.
TEST(SwaDivergence, ANegativeIntervalIsRefusedByName) {
  const int64_t live_before = LiveBufferCount();
  EXPECT_EQ(ErrorMessage([] { FakeEngine engine(SwaOptions(/*interval=*/-1)); }),
            "kv-canary: swa_divergence_stats_interval must be in [0, 2147483647], got -1");
  EXPECT_EQ(LiveBufferCount(), live_before);
  EXPECT_EQ(ErrorMessage([] {
              Config::FromEnv([](const std::string& name) -> std::optional<std::string> {
                if (name == "KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL") return "-2";
                return std::nullopt;
              });
            }),
            "kv-canary: KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL must be in [0, 2147483647], got -2");
}

}  // namespace
}  // namespace kvcanary::runtime
