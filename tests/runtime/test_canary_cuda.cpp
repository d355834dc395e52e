// The step protocol on CUDA tensors (the GPU half of test_canary_manager.cpp): the fake engine's
// pool, req_to_token and batch live on the device and every canary launch runs on the engine's
// stream. Each corruption scenario runs on the CPU and on CUDA and must report the same violation
// rows; then phases 2-3 are captured in a CUDA graph with the model's KV write and replayed over
// changing batches, against an eager run of the same steps. Every test skips without a device.
#include "kvcanary/runtime/canary_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/fake_engine.h"

#ifdef KVC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::PreparedStep;

#define KVC_SKIP_WITHOUT_CUDA() \
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device"

constexpr int64_t Tag(CanaryLaunchTag tag) { return static_cast<int64_t>(tag); }

// One reported row with the step it was reported in: (step, the row's eight fields).
using RowKey = std::array<int64_t, 9>;

RowKey KeyOf(const ViolationRow& row, int64_t step) {
  return {step,          row.kernel_kind,       row.slot_idx,     row.position,
          row.stored_token, row.expected_token, row.stored_chain_hash, row.expected_aux,
          row.fail_reason_bits};
}

std::string ToString(const std::vector<RowKey>& rows) {
  std::ostringstream out;
  for (const RowKey& key : rows) {
    out << "\n  step=" << key[0] << " tag=" << LaunchTagLabel(key[1]) << " slot=" << key[2]
        << " pos=" << key[3] << " token=" << key[4] << "/" << key[5] << " chain=" << key[6]
        << " aux=" << key[7] << " bits=" << key[8];
  }
  return out.str();
}

// What a run reported: its rows sorted (compared as multisets), and counters at the end.
struct Report {
  std::vector<RowKey> rows;
  MetricsSnapshot metrics;
  int64_t split_steps = 0;
  std::vector<std::string> violation_lines;
};

using Scenario = std::function<void(FakeEngine&)>;

FakeEngineOptions LogOptions(RealKvHashMode real_data = RealKvHashMode::kPartial) {
  FakeEngineOptions options;
  options.config.mode = Mode::kLog;
  options.config.real_data = real_data;
  options.config.enable_mha_v = true;
  return options;
}

Report Run(Device device, FakeEngineOptions options, const Scenario& scenario) {
  options.device = device;
  FakeEngine engine(options);
  if (engine.canary == nullptr) throw std::runtime_error("the runtime was not installed");
  Report report;
  engine.canary->SetViolationListener([&report](const ViolationRow& row, int64_t step) {
    report.rows.push_back(KeyOf(row, step));
  });
  scenario(engine);
  engine.Synchronize();
  std::sort(report.rows.begin(), report.rows.end());
  report.metrics = engine.canary->Metrics();
  report.split_steps = engine.canary->split_steps();
  for (const std::string& line : engine.log.lines) {
    if (line.find("kv_canary violation") != std::string::npos) report.violation_lines.push_back(line);
  }
  std::sort(report.violation_lines.begin(), report.violation_lines.end());
  if (device.type == DeviceType::kCUDA &&
      !engine.log.Contains("install_canary: device=" + device.ToString())) {
    throw std::runtime_error("the runtime did not install on " + device.ToString());
  }
  return report;
}

// Runs the scenario on the CPU and on CUDA; the CUDA run must report exactly the CPU's rows,
// log lines and counters. Returns the CUDA report.
Report RunBothAndCompare(const FakeEngineOptions& options, const Scenario& scenario) {
  const Report cpu = Run(Device::CPU(), options, scenario);
  const Report cuda = Run(Device::CUDA(0), options, scenario);
  EXPECT_EQ(cuda.rows, cpu.rows) << "CUDA rows:" << ToString(cuda.rows)
                                 << "\nCPU rows:" << ToString(cpu.rows);
  EXPECT_EQ(cuda.violation_lines, cpu.violation_lines);
  EXPECT_EQ(cuda.metrics.kernel_runs, cpu.metrics.kernel_runs);
  EXPECT_EQ(cuda.metrics.protected_tokens, cpu.metrics.protected_tokens);
  EXPECT_EQ(cuda.metrics.violations_total, cpu.metrics.violations_total);
  EXPECT_EQ(cuda.split_steps, cpu.split_steps);
  return cuda;
}

bool HasRow(const Report& report, int64_t tag, int64_t reason, int64_t slot = -1) {
  for (const RowKey& key : report.rows) {
    if (key[1] == tag && (key[8] & reason) != 0 && (slot < 0 || key[2] == slot)) return true;
  }
  return false;
}

TEST(CanaryCuda, CleanRunReportsNothingAndCountsLikeTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  const Report cuda = RunBothAndCompare(LogOptions(), [](FakeEngine& engine) {
    engine.AddRequest(20);
    engine.AddRequest(7);
    for (int i = 0; i < 30; ++i) engine.Step();
    EXPECT_EQ(engine.canary->outer_step(), 30);
  });
  EXPECT_TRUE(cuda.rows.empty()) << ToString(cuda.rows);
  int64_t protected_tokens = 0;
  for (int64_t count : cuda.metrics.protected_tokens) protected_tokens += count;
  EXPECT_GT(protected_tokens, 0);
  EXPECT_EQ(cuda.metrics.kernel_runs[Tag(CanaryLaunchTag::kTailVFull)], 2 * 29);
  EXPECT_EQ(cuda.metrics.violations_total, 0);
}

TEST(CanaryCuda, RemappedPrefixEntryMatchesTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  const Report cuda = RunBothAndCompare(LogOptions(), [](FakeEngine& engine) {
    const int64_t row = engine.AddRequest(10);
    engine.AddRequest(10);
    for (int i = 0; i < 3; ++i) engine.Step();
    // Position 4 of request 1 now points at a live slot of request 2.
    engine.SetSlot(row, 4, engine.SlotOf(2, 6));
    engine.Step();
    engine.Step();
  });
  ASSERT_FALSE(cuda.rows.empty());
  EXPECT_EQ(cuda.rows.front()[0], 5) << "reported one step late";
  EXPECT_TRUE(HasRow(cuda, Tag(CanaryLaunchTag::kHeadKFull), FailReason::kVerifyPositionMismatch));
}

class CanaryCudaRealData : public ::testing::TestWithParam<RealKvHashMode> {};

TEST_P(CanaryCudaRealData, FlippedKvByteMatchesTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t slot = -1;
  const Report cuda = RunBothAndCompare(LogOptions(GetParam()), [&slot](FakeEngine& engine) {
    engine.AddRequest(12);
    for (int i = 0; i < 3; ++i) engine.Step();
    slot = engine.SlotOf(1, 5);
    engine.FlipKByte(slot, 3);
    engine.Step();
    engine.Step();
  });
  ASSERT_FALSE(cuda.rows.empty());
  EXPECT_TRUE(HasRow(cuda, Tag(CanaryLaunchTag::kTailKFull), FailReason::kVerifyRealKvHashMismatch,
                     slot));
  for (const RowKey& key : cuda.rows) {
    EXPECT_NE(key[1], Tag(CanaryLaunchTag::kHeadKFull)) << "HEAD records carry no fingerprint";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CanaryCudaRealData,
                         ::testing::Values(RealKvHashMode::kPartial, RealKvHashMode::kAll));

TEST(CanaryCuda, FlippedKvByteIsInvisibleWithoutRealData) {
  KVC_SKIP_WITHOUT_CUDA();
  const Report cuda = RunBothAndCompare(LogOptions(RealKvHashMode::kNone), [](FakeEngine& engine) {
    engine.AddRequest(12);
    for (int i = 0; i < 3; ++i) engine.Step();
    engine.FlipKByte(engine.SlotOf(1, 5), 3);
    for (int i = 0; i < 3; ++i) engine.Step();
  });
  EXPECT_TRUE(cuda.rows.empty()) << ToString(cuda.rows);
}

TEST(CanaryCuda, SplitVerificationMatchesTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = LogOptions();
  options.config.fused_verify = false;  // SGLang's plan arrays, which can overflow
  options.capacities = Capacities{/*verify=*/16, /*write_req=*/8, /*write_entry=*/256};
  const Report cuda = RunBothAndCompare(options, [](FakeEngine& engine) {
    for (int r = 0; r < 4; ++r) engine.AddRequest(12);
    for (int i = 0; i < 3; ++i) engine.Step();
    EXPECT_TRUE(engine.log.Contains("verified outside the graph in"));
    EXPECT_FALSE(engine.log.Contains("verify skipped this step"));
    engine.SetSlot(3, 2, engine.SlotOf(4, 9));
    engine.Step();
    engine.Step();
  });
  ASSERT_FALSE(cuda.rows.empty()) << "a step over capacity was not verified on CUDA";
  EXPECT_GT(cuda.split_steps, 0);
  EXPECT_TRUE(HasRow(cuda, Tag(CanaryLaunchTag::kHeadKFull), FailReason::kVerifyPositionMismatch));
}

TEST(CanaryCuda, RaiseModeThrowsOnCuda) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = LogOptions();
  options.config.mode = Mode::kRaise;
  options.device = Device::CUDA(0);
  FakeEngine engine(options);
  engine.AddRequest(10);
  for (int i = 0; i < 2; ++i) engine.Step();
  engine.SetSlot(1, 3, engine.SlotOf(1, 7));
  engine.Step();
  try {
    engine.Step();
    FAIL() << "raise mode did not raise on CUDA";
  } catch (const ViolationError& error) {
    EXPECT_NE(std::string(error.what()).find("kv_canary violation: launch_tag=HEAD_K_FULL"),
              std::string::npos)
        << error.what();
  }
}

TEST(CanaryCuda, GraphCaptureIsRefusedOnTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = LogOptions();
  options.graph_capture = true;
  EXPECT_THROW(FakeEngine engine(options), Error);
  options.device = Device::CUDA(0);
  EXPECT_NO_THROW(FakeEngine engine(options));
}

#ifdef KVC_HAVE_CUDA

void CudaCheck(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(status));
  }
}

// A captured graph and its executable, destroyed before the engine whose buffers it names.
struct Graph {
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  size_t nodes = 0;
  int replays = 0;
};

enum class Forward { kCpuEager, kCudaEager, kCudaGraph };

constexpr int64_t kPaddedBs = 4;  // three live decode rows and one padding row, every step
constexpr int kDecodeSteps = 10;

// Runs a decode-only step of fixed shape in a captured graph: the first call captures phase 2,
// the model's KV write (a copy of the host pool) and phase 3, then launches the graph; later
// calls write the step's batch into the same device buffers and replay it.
void GraphDecodeStep(FakeEngine& engine, Graph& graph) {
  const PreparedStep step = engine.PrepareStep(kPaddedBs);
  const ForwardBatch& batch = step.input.forwards[0];
  if (batch.batch_size != kPaddedBs || batch.num_tokens != kPaddedBs) {
    throw std::runtime_error("a replayed step changed the captured shape");
  }
  const auto stream = static_cast<cudaStream_t>(engine.stream());
  engine.canary->BeginStep(step.input);  // phase 1: host, outside the graph
  engine.WriteKv(step);                  // the host pool; the graph copies it to the device
  if (graph.exec == nullptr) {
    CudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture");
    if (!IsStreamCapturing(engine.device(), engine.stream())) {
      throw std::runtime_error("the stream is not capturing");
    }
    engine.canary->PreForward(0);
    engine.EnqueuePoolCopy();
    engine.canary->PostForward(0);
    CudaCheck(cudaStreamEndCapture(stream, &graph.graph), "cudaStreamEndCapture");
    CudaCheck(cudaGraphGetNodes(graph.graph, nullptr, &graph.nodes), "cudaGraphGetNodes");
    CudaCheck(cudaGraphInstantiate(&graph.exec, graph.graph, 0), "cudaGraphInstantiate");
    CudaCheck(cudaGraphLaunch(graph.exec, stream), "cudaGraphLaunch");
  } else {
    CudaCheck(cudaGraphLaunch(graph.exec, stream), "cudaGraphLaunch");
    engine.canary->ReplayedForward(0);
    graph.replays += 1;
  }
  engine.canary->EndStep();
}

// Three requests prefill eagerly, then decode kDecodeSteps fixed-shape steps (padded to
// kPaddedBs) as `forward` says; `corrupt(engine, d)` runs before decode step d.
struct GraphRun {
  Report report;
  size_t nodes = 0;
  int replays = 0;
};

GraphRun RunDecode(Forward forward, const std::function<void(FakeEngine&, int)>& corrupt) {
  FakeEngineOptions options = LogOptions();
  options.cuda_graph_max_bs = kPaddedBs;
  options.graph_capture = forward == Forward::kCudaGraph;
  const Device device = forward == Forward::kCpuEager ? Device::CPU() : Device::CUDA(0);
  GraphRun run;
  run.report = Run(device, options, [&](FakeEngine& engine) {
    Graph graph;  // declared inside: destroyed before the engine
    engine.AddRequest(10);
    engine.AddRequest(7);
    engine.AddRequest(12);
    engine.Step();  // the prefill, eager in every run
    for (int d = 0; d < kDecodeSteps; ++d) {
      corrupt(engine, d);
      if (forward == Forward::kCudaGraph) {
        GraphDecodeStep(engine, graph);
      } else {
        engine.Step(kPaddedBs);
      }
    }
    engine.Synchronize();
    run.nodes = graph.nodes;
    run.replays = graph.replays;
  });
  return run;
}

// The graph run must report what the eager CUDA and CPU runs of the same steps report.
GraphRun RunGraphAndCompare(const std::function<void(FakeEngine&, int)>& corrupt) {
  const GraphRun cpu = RunDecode(Forward::kCpuEager, corrupt);
  const GraphRun eager = RunDecode(Forward::kCudaEager, corrupt);
  const GraphRun graph = RunDecode(Forward::kCudaGraph, corrupt);
  EXPECT_EQ(graph.replays, kDecodeSteps - 1);
  EXPECT_GT(graph.nodes, 2u) << "phases 2-3 enqueued nothing into the graph";
  EXPECT_EQ(eager.report.rows, cpu.report.rows) << "eager CUDA:" << ToString(eager.report.rows)
                                                << "\nCPU:" << ToString(cpu.report.rows);
  EXPECT_EQ(graph.report.rows, eager.report.rows)
      << "graph:" << ToString(graph.report.rows) << "\neager:" << ToString(eager.report.rows);
  EXPECT_EQ(graph.report.violation_lines, eager.report.violation_lines);
  // The counters prove every replay ran the canary launches, not only the captured step.
  EXPECT_EQ(graph.report.metrics.kernel_runs, eager.report.metrics.kernel_runs);
  EXPECT_EQ(graph.report.metrics.protected_tokens, eager.report.metrics.protected_tokens);
  EXPECT_EQ(eager.report.metrics.kernel_runs, cpu.report.metrics.kernel_runs);
  return graph;
}

TEST(CanaryCudaGraph, CleanReplaysReportNothing) {
  KVC_SKIP_WITHOUT_CUDA();
  const GraphRun graph = RunGraphAndCompare([](FakeEngine&, int) {});
  EXPECT_TRUE(graph.report.rows.empty()) << ToString(graph.report.rows);
  // 1 prefill + 10 decode steps; counters trail one step: 10 TAIL runs were read back.
  EXPECT_EQ(graph.report.metrics.kernel_runs[Tag(CanaryLaunchTag::kTailKFull)], 2 * kDecodeSteps);
  int64_t protected_tokens = 0;
  for (int64_t count : graph.report.metrics.protected_tokens) protected_tokens += count;
  EXPECT_GT(protected_tokens, 0);
}

TEST(CanaryCudaGraph, RemapBetweenReplaysIsReportedByHead) {
  KVC_SKIP_WITHOUT_CUDA();
  const GraphRun graph = RunGraphAndCompare([](FakeEngine& engine, int d) {
    if (d == 4) engine.SetSlot(1, 4, engine.SlotOf(3, 6));
  });
  ASSERT_FALSE(graph.report.rows.empty()) << "a replayed graph missed a remapped prefix entry";
  // Corrupted before step 5 (1 prefill + decode 4), reported at the end of the next step.
  EXPECT_EQ(graph.report.rows.front()[0], 7);
  EXPECT_TRUE(HasRow(graph.report, Tag(CanaryLaunchTag::kHeadKFull),
                     FailReason::kVerifyPositionMismatch));
}

TEST(CanaryCudaGraph, KvFlipBetweenReplaysIsReportedByTail) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t slot = -1;
  const GraphRun graph = RunGraphAndCompare([&slot](FakeEngine& engine, int d) {
    if (d == 6) {
      slot = engine.SlotOf(2, 3);
      engine.FlipKByte(slot, 5);
    }
  });
  ASSERT_FALSE(graph.report.rows.empty()) << "a replayed graph missed a flipped KV byte";
  EXPECT_TRUE(HasRow(graph.report, Tag(CanaryLaunchTag::kTailKFull),
                     FailReason::kVerifyRealKvHashMismatch, slot));
  for (const RowKey& key : graph.report.rows) {
    EXPECT_NE(key[1], Tag(CanaryLaunchTag::kHeadKFull)) << "HEAD records carry no fingerprint";
  }
}

TEST(CanaryCudaGraph, PostForwardAfterAReplayIsAPhaseError) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = LogOptions();
  options.device = Device::CUDA(0);
  options.graph_capture = true;
  options.cuda_graph_max_bs = kPaddedBs;
  FakeEngine engine(options);
  Graph graph;
  for (int r = 0; r < 3; ++r) engine.AddRequest(5);
  engine.Step();
  GraphDecodeStep(engine, graph);  // captures
  GraphDecodeStep(engine, graph);  // replays
  EXPECT_EQ(graph.replays, 1);
  const PreparedStep step = engine.PrepareStep(kPaddedBs);
  engine.canary->BeginStep(step.input);
  CudaCheck(cudaGraphLaunch(graph.exec, static_cast<cudaStream_t>(engine.stream())),
            "cudaGraphLaunch");
  engine.canary->ReplayedForward(0);
  EXPECT_THROW(engine.canary->PostForward(0), Error);
  EXPECT_NO_THROW(engine.canary->EndStep());
  engine.Synchronize();
}

#endif  // KVC_HAVE_CUDA

}  // namespace
}  // namespace kvcanary::runtime
