// What the perturbation tests share: a recorder of violation rows and perturbation events, the
// engine options and PerturbConfig that fire one kind at probability 1, a recorded engine, a flat
// radix view and the TAIL detection of a real-KV byte flip.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/radix_view.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {

struct Recorder {
  std::vector<ViolationRow> rows;
  std::vector<int64_t> steps;
  std::vector<PerturbationEvent> events;
};

// Whether some recorded row has launch tag `tag`, a reason among `bits` and slot `slot`.
inline bool Caught(const Recorder& recorder, int64_t tag, int64_t bits, int64_t slot) {
  for (const ViolationRow& row : recorder.rows) {
    if (row.kernel_kind == tag && (row.fail_reason_bits & bits) && row.slot_idx == slot) {
      return true;
    }
  }
  return false;
}

// HEAD records carry no fingerprint: a byte flip is only ever seen by TAIL (or SWEEP).
inline void ExpectNoHeadRows(const Recorder& recorder, int64_t head_tag) {
  for (const ViolationRow& row : recorder.rows) EXPECT_NE(row.kernel_kind, head_tag);
}

inline void Record(CanaryManager& canary, Recorder& recorder) {
  canary.SetViolationListener([&recorder](const ViolationRow& row, int64_t step) {
    recorder.rows.push_back(row);
    recorder.steps.push_back(step);
  });
  canary.SetPerturbationListener(
      [&recorder](const PerturbationEvent& event) { recorder.events.push_back(event); });
}

inline int CountLines(const testing::CapturingLog& log, const std::string& text) {
  return static_cast<int>(std::count_if(log.lines.begin(), log.lines.end(), [&](const auto& line) {
    return line.find(text) != std::string::npos;
  }));
}

constexpr int64_t kHeadK = static_cast<int64_t>(CanaryLaunchTag::kHeadKFull);
constexpr int64_t kTailK = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);

inline testing::FakeEngineOptions PerturbOptions(PerturbConfig perturb) {
  testing::FakeEngineOptions options;
  options.config.mode = Mode::kLog;
  options.config.real_data = RealKvHashMode::kPartial;
  options.perturb = perturb;
  return options;
}

inline PerturbConfig Fire(double PerturbConfig::*kind, int64_t warmup_steps = 2) {
  PerturbConfig perturb;
  perturb.*kind = 1.0;
  perturb.warmup_steps = warmup_steps;
  perturb.target_group = GroupKind::kFull;
  perturb.seed = 7;
  return perturb;
}

// A fake engine over `options` whose violation rows and perturbation events go to `recorder`.
struct RecordedEngine {
  explicit RecordedEngine(const testing::FakeEngineOptions& options) : engine(options) {
    Record(*engine.canary, recorder);
  }
  testing::FakeEngine engine;
  Recorder recorder;
};

// A radix view whose nodes are all children of the root, each holding the slots of positions
// [0, n) of one cached prefix, locked (held by a running request) or not.
class FlatRadix final : public RadixView {
 public:
  struct Node {
    std::vector<int64_t> slots;
    bool locked = false;
  };
  explicit FlatRadix(std::vector<Node> nodes) : nodes_(std::move(nodes)) {}
  NodeId Root() const override { return 0; }
  std::vector<NodeId> Children(NodeId node) const override {
    std::vector<NodeId> children;
    if (node == 0) {
      for (size_t i = 0; i < nodes_.size(); ++i) children.push_back(static_cast<NodeId>(i) + 1);
    }
    return children;
  }
  int64_t KeyLength(NodeId node) const override {
    return static_cast<int64_t>(DeviceSlots(node).size());
  }
  std::vector<int64_t> DeviceSlots(NodeId node) const override {
    return node == 0 ? std::vector<int64_t>{} : nodes_[node - 1].slots;
  }
  bool IsLocked(NodeId node, bool) const override { return node != 0 && nodes_[node - 1].locked; }
  bool IsSwaResident(NodeId) const override { return true; }

 private:
  std::vector<Node> nodes_;
};

// The slots of positions [0, count) of request `row`.
inline std::vector<int64_t> SlotsOf(const testing::FakeEngine& engine, int64_t row,
                                    int64_t count) {
  std::vector<int64_t> slots;
  for (int64_t pos = 0; pos < count; ++pos) slots.push_back(engine.SlotOf(row, pos));
  return slots;
}

// Adds one request per prompt length, then runs `steps` steps.
inline void Serve(testing::FakeEngine& engine, std::initializer_list<int64_t> prompt_lens,
                  int steps) {
  for (int64_t len : prompt_lens) engine.AddRequest(len);
  for (int i = 0; i < steps; ++i) engine.Step();
}

// Fires the real-KV flip `kind` (named `name` in its events) after two warm-up steps while
// serving `prompt_lens` for `steps` steps. Expects the first event at outer step 2, reported
// `report_delay` steps later by TAIL's real-KV hash at the flipped slot, and no HEAD row (HEAD
// records carry no fingerprint). Returns that event (a default one, and a failure, if none fired).
inline PerturbationEvent ExpectFlipCaughtByTail(double PerturbConfig::*kind,
                                                const std::string& name,
                                                std::initializer_list<int64_t> prompt_lens,
                                                int steps, int64_t report_delay) {
  RecordedEngine run(PerturbOptions(Fire(kind)));
  Serve(run.engine, prompt_lens, steps);
  const Recorder& recorder = run.recorder;
  if (recorder.events.empty() || recorder.rows.empty()) {
    ADD_FAILURE() << name << ": " << recorder.events.size() << " events, " << recorder.rows.size()
                  << " rows";
    return {};
  }
  const PerturbationEvent& event = recorder.events.front();
  EXPECT_EQ(event.kind, name);
  EXPECT_EQ(event.step, 2);
  EXPECT_EQ(recorder.steps.front(), event.step + report_delay);
  EXPECT_TRUE(Caught(recorder, kTailK, FailReason::kVerifyRealKvHashMismatch, event.slot));
  ExpectNoHeadRows(recorder, kHeadK);
  return event;
}

}  // namespace kvcanary::runtime
