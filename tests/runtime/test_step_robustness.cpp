// An engine's bugs and callbacks never leave the runtime broken: a refused call changes nothing
// and the step can go on, a throwing listener or log sink costs no report, bad host rows are never
// read past the table, and a radix view that is not a tree is refused instead of walked forever.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/radix_view.h"
#include "runtime/engine_scenarios.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

// The host input is the unpadded batch; more rows than the device batch would be copied past the
// per-row buffers (the token pool's valid lengths).
TEST(StepRobustness, HostRowsPastTheBatchAreRefusedAndChangeNothing) {
  FakeEngine engine(LogOptions());
  engine.AddRequest(3);
  engine.AddRequest(3);
  engine.Step();
  const testing::PreparedStep step = engine.PrepareStep();
  StepInput bad = step.input;
  bad.host[0].req_pool_indices.push_back(1);
  bad.host[0].prefix_lens.push_back(0);
  bad.host[0].extend_seq_lens.push_back(0);
  EXPECT_EQ(ErrorMessage([&] { engine.canary->BeginStep(bad); }),
            "kv-canary: host req_pool_indices has 3 rows, more than the forward's batch_size=2");
  engine.RunStep(step);  // nothing began: the step runs as it would have
  engine.Step();
  EXPECT_EQ(engine.canary->outer_step(), 3);
  EXPECT_FALSE(engine.log.Contains("kv_canary violation:"));
}

// An end_step before the forward's post_forward is refused and changes nothing: the step is then
// ended the right way.
TEST(StepRobustness, ARefusedEndStepLeavesTheStepToBeEnded) {
  FakeEngine engine(LogOptions());
  engine.AddRequest(3);
  const testing::PreparedStep step = engine.PrepareStep();
  engine.canary->BeginStep(step.input);
  engine.canary->PreForward(0);
  engine.WriteKv(step);
  engine.UploadKvRows(step);
  EXPECT_THROW(engine.canary->EndStep(), Error);
  engine.canary->PostForward(0);
  engine.canary->EndStep();
  engine.Step();
  EXPECT_EQ(engine.canary->outer_step(), 2);
}

// A PreForward whose ops refuse the batch (an input_ids column shorter than the tokens) leaves the
// forward's phase where it was: no TAIL and no end of a step whose HEAD did not run, so no false
// report follows. AbandonStep starts over.
TEST(StepRobustness, ARefusedPreForwardLeavesThePhaseAndAbandonStartsOver) {
  FakeEngine engine(LogOptions());
  engine.AddRequest(3);
  engine.Step();
  const testing::PreparedStep step = engine.PrepareStep();
  StepInput bad = step.input;
  const TensorView& ids = bad.forwards[0].input_ids;
  bad.forwards[0].input_ids = TensorView(ids.data(), ids.dtype(), ids.device(), {0});
  engine.canary->BeginStep(bad);
  EXPECT_THROW(engine.canary->PreForward(0), Error);
  EXPECT_THROW(engine.canary->PostForward(0), Error);
  EXPECT_THROW(engine.canary->EndStep(), Error);
  engine.canary->AbandonStep();
  engine.RunStep(step);
  engine.Step();
  engine.Step();
  EXPECT_EQ(engine.canary->outer_step(), 4);
  EXPECT_FALSE(engine.log.Contains("kv_canary violation:"));
}

TEST(StepRobustness, AThrowingListenerCostsNoRowItsReport) {
  FakeEngine engine(LogOptions());
  int calls = 0;
  engine.canary->SetViolationListener([&calls](const ViolationRow&, int64_t) {
    calls += 1;
    throw std::runtime_error("listener bug");
  });
  RunIntoARemappedPrefixEntry(engine);
  ASSERT_GT(calls, 1);
  EXPECT_TRUE(engine.log.Contains("ERROR kv-canary: the violation listener threw: listener bug"));
  int reported = 0;
  for (const std::string& line : engine.log.lines) {
    reported += line.find("kv_canary violation:") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(reported, calls);  // every row the listener saw was logged too
}

TEST(StepRobustness, AThrowingLogSinkNeverBreaksTheStep) {
  FakeEngine engine(LogOptions());
  engine.log.throws = true;
  EXPECT_NO_THROW(RunIntoARemappedPrefixEntry(engine));
  EXPECT_TRUE(engine.log.Contains("kv_canary violation:"));  // offered to the sink first
  EXPECT_EQ(engine.canary->outer_step(), 5);
}

// Host rows the SWA divergence report reads: an index past the table is skipped and a length past
// the row clamped, never read past the table (the address sanitizer build checks the reads).
TEST(StepRobustness, TheSwaDivergenceReportReadsOnlyInsideTheTable) {
  FakeEngineOptions options = LogOptions();
  options.swa_window = 4;
  options.config.swa_divergence_stats_interval = 1;
  FakeEngine engine(options);
  engine.AddRequest(6);
  engine.AddRequest(6);
  engine.Step();
  testing::PreparedStep step = engine.PrepareStep();
  ForwardHostInput& host = step.input.host[0];
  host.req_pool_indices[1] = int64_t{1} << 40;  // past the table's rows: skipped
  host.extend_seq_lens[0] = int64_t{1} << 62;   // past the row: clamped to its width
  engine.RunStep(step);
  EXPECT_TRUE(engine.log.Contains("swa divergence: step=2 rows=1 "));
}

// A view whose children form a cycle: the sweep refuses it with an error, and the step is ended
// all the same (its count advances, the next step runs).
class CyclicRadix final : public RadixView {
 public:
  NodeId Root() const override { return 0; }
  std::vector<NodeId> Children(NodeId node) const override {
    return {node == 0 ? NodeId{1} : node == 1 ? NodeId{2} : NodeId{1}};
  }
  int64_t KeyLength(NodeId) const override { return 0; }
  std::vector<int64_t> DeviceSlots(NodeId) const override { return {}; }
  bool IsLocked(NodeId, bool) const override { return false; }
  bool IsSwaResident(NodeId) const override { return true; }
};

TEST(StepRobustness, ACyclicRadixViewIsRefusedAndTheStepStillEnds) {
  FakeEngineOptions options = LogOptions();
  options.config.sweep_interval = 1;
  FakeEngine engine(options);
  const CyclicRadix view;
  engine.canary->AttachRadixCache(&view);
  engine.AddRequest(3);
  EXPECT_EQ(ErrorMessage([&] { engine.Step(); }),
            "kv-canary: the radix view reaches node 1 twice (a cycle, or a node under two "
            "parents): not a tree, not walked");
  EXPECT_EQ(engine.canary->outer_step(), 1);
  engine.canary->AttachRadixCache(nullptr);
  engine.Step();
  EXPECT_EQ(engine.canary->outer_step(), 2);
}

}  // namespace
}  // namespace kvcanary::runtime
