// Phases 2-3 of the step protocol captured in a CUDA graph with the model's KV write and replayed
// over changing batches, against eager CUDA and CPU runs of the same steps: remaps, KV flips (in
// any fingerprinted layer), sampled verify and quarantine; and graph capture refused on the CPU.
// Every test skips without a device.
#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/owned_graph.h"
#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/canary_cuda_util.h"
#include "runtime/fake_engine.h"
#include "runtime/sampled_scenarios.h"

#ifdef KVC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::PreparedStep;

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
struct Graph : ::kvcanary::testing::OwnedGraph {
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
  std::vector<int64_t> affected;  // req_pool_idx of TakeAffectedRequests at the end
};

using Corrupt = std::function<void(FakeEngine&, int)>;

GraphRun RunDecode(Forward forward, FakeEngineOptions options, const Corrupt& corrupt) {
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
    for (const AffectedRequest& request : engine.canary->TakeAffectedRequests()) {
      run.affected.push_back(request.req_pool_idx);
    }
  });
  return run;
}

// The graph run must report (and quarantine) what the eager CUDA and CPU runs of the same steps
// report.
GraphRun RunGraphAndCompare(const Corrupt& corrupt,
                            const FakeEngineOptions& options = LogOptions()) {
  const GraphRun cpu = RunDecode(Forward::kCpuEager, options, corrupt);
  const GraphRun eager = RunDecode(Forward::kCudaEager, options, corrupt);
  const GraphRun graph = RunDecode(Forward::kCudaGraph, options, corrupt);
  EXPECT_EQ(graph.replays, kDecodeSteps - 1);
  EXPECT_GT(graph.nodes, 2u) << "phases 2-3 enqueued nothing into the graph";
  EXPECT_EQ(eager.report.rows, cpu.report.rows)
      << "eager CUDA:" << ToString(eager.report.rows) << "\nCPU:" << ToString(cpu.report.rows);
  EXPECT_EQ(graph.report.rows, eager.report.rows)
      << "graph:" << ToString(graph.report.rows) << "\neager:" << ToString(eager.report.rows);
  EXPECT_EQ(graph.report.violation_lines, eager.report.violation_lines);
  // The counters prove every replay ran the canary launches, not only the captured step.
  EXPECT_EQ(graph.report.metrics.kernel_runs, eager.report.metrics.kernel_runs);
  EXPECT_EQ(graph.report.metrics.protected_tokens, eager.report.metrics.protected_tokens);
  EXPECT_EQ(eager.report.metrics.kernel_runs, cpu.report.metrics.kernel_runs);
  EXPECT_EQ(graph.affected, eager.affected);
  EXPECT_EQ(eager.affected, cpu.affected);
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

// Before decode step 4: position 4 of request 1 pointed at request 3's slot of position 6.
void RemapBeforeDecode4(FakeEngine& engine, int d) {
  if (d == 4) engine.SetSlot(1, 4, engine.SlotOf(3, 6));
}

TEST(CanaryCudaGraph, RemapBetweenReplaysIsReportedByHead) {
  KVC_SKIP_WITHOUT_CUDA();
  const GraphRun graph = RunGraphAndCompare(RemapBeforeDecode4);
  ASSERT_FALSE(graph.report.rows.empty()) << "a replayed graph missed a remapped prefix entry";
  // Corrupted before step 5 (1 prefill + decode 4), reported at the end of the next step.
  EXPECT_EQ(graph.report.rows.front()[0], 7);
  EXPECT_TRUE(
      HasRow(graph.report, Tag(CanaryLaunchTag::kHeadKFull), FailReason::kVerifyPositionMismatch));
}

// Flips byte 5 of `layer`'s K of request 2's position 3 before decode step 6; the slot in `slot`.
Corrupt FlipBeforeDecode6(int64_t& slot, int64_t layer = 0) {
  return [&slot, layer](FakeEngine& engine, int d) {
    if (d != 6) return;
    slot = engine.SlotOf(2, 3);
    engine.FlipKByte(slot, 5, layer);
  };
}

TEST(CanaryCudaGraph, KvFlipBetweenReplaysIsReportedByTail) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t slot = -1;
  const GraphRun graph = RunGraphAndCompare(FlipBeforeDecode6(slot));
  ASSERT_FALSE(graph.report.rows.empty()) << "a replayed graph missed a flipped KV byte";
  EXPECT_TRUE(HasRow(graph.report, Tag(CanaryLaunchTag::kTailKFull),
                     FailReason::kVerifyRealKvHashMismatch, slot));
  for (const RowKey& key : graph.report.rows) {
    EXPECT_NE(key[1], Tag(CanaryLaunchTag::kHeadKFull)) << "HEAD records carry no fingerprint";
  }
}

// Every-layer fingerprints in a graph: the captured TAIL folds every listed layer, so a byte of
// the deepest of four flipped between replays is reported; with layer 0 fingerprinted alone the
// same flip goes unseen (the graph's pool copy carries every layer, so a false report would show).
FakeEngineOptions FourLayers(FingerprintLayers layers) {
  FakeEngineOptions options = LogOptions(RealKvHashMode::kAll);
  options.layers = 4;
  options.config.fingerprint_layers = layers;
  return options;
}

TEST(CanaryCudaGraph, DeepLayerFlipBetweenReplaysIsReportedWithAllLayers) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t slot = -1;
  const GraphRun graph =
      RunGraphAndCompare(FlipBeforeDecode6(slot, 3), FourLayers(FingerprintLayers::kAll));
  ASSERT_FALSE(graph.report.rows.empty()) << "a replayed graph missed a flip in layer 3";
  for (const RowKey& key : graph.report.rows) {
    EXPECT_EQ(key[2], slot) << ToString(graph.report.rows);
    EXPECT_TRUE(key[8] & FailReason::kVerifyRealKvHashMismatch) << ToString(graph.report.rows);
  }
  EXPECT_TRUE(HasRow(graph.report, Tag(CanaryLaunchTag::kTailKFull),
                     FailReason::kVerifyRealKvHashMismatch, slot));
}

TEST(CanaryCudaGraph, DeepLayerFlipGoesUnseenWithLayer0Alone) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t slot = -1;
  const GraphRun graph =
      RunGraphAndCompare(FlipBeforeDecode6(slot, 3), FourLayers(FingerprintLayers::kLayer0));
  EXPECT_GT(slot, 0) << "the flip did not run";
  EXPECT_TRUE(graph.report.rows.empty()) << ToString(graph.report.rows);
}

// Quarantine in a graph: a remap between replays names the request that read the wrong slot (1)
// and the one that owns it (3), never request 2; with on_violation log nothing is kept.
TEST(CanaryCudaGraph, RemapBetweenReplaysQuarantinesTheRequestsHoldingTheSlot) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = LogOptions();
  options.config.on_violation = OnViolation::kQuarantine;
  const GraphRun graph = RunGraphAndCompare(RemapBeforeDecode4, options);
  ASSERT_FALSE(graph.report.rows.empty());
  EXPECT_EQ(graph.affected, (std::vector<int64_t>{1, 3}));
  const GraphRun logged = RunGraphAndCompare(RemapBeforeDecode4);
  EXPECT_EQ(logged.report.rows, graph.report.rows);
  EXPECT_TRUE(logged.affected.empty());
}

// Sampled verify in a graph: the phase lives on the device and the captured TAIL advances it, so
// replays keep rotating: every remapped position is reported within K + 1 steps (a frozen phase
// would never sample some of them), and some take longer than the next step. The same whether
// each verify derives its entries or HEAD stores them for both (Config::verify_entries).
TEST(CanaryCudaGraph, SampledVerifyKeepsRotatingAcrossReplays) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t largest[2] = {0, 0};
  for (VerifyEntries entries : {VerifyEntries::kDerive, VerifyEntries::kStore}) {
    SCOPED_TRACE(VerifyEntriesName(entries));
    FakeEngineOptions options = SampledOptions(4, Device::CUDA(0));
    options.config.verify_entries = entries;
    options.graph_capture = true;
    options.cuda_graph_max_bs = kPaddedBs;
    struct GraphSteps {
      Graph graph;
      void operator()(FakeEngine& engine) { GraphDecodeStep(engine, graph); }
    };
    largest[entries == VerifyEntries::kStore] =
        ExpectEveryPositionReportedWithinKSteps(options, [] { return GraphSteps{}; });
    EXPECT_GT(largest[entries == VerifyEntries::kStore], 2);
  }
  EXPECT_EQ(largest[1], largest[0]);
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
