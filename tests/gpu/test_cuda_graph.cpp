// A whole step under CUDA graph capture: plan, verify and write enqueued on
// one stream are captured in global mode, where any synchronising call invalidates the capture;
// the graph is replayed, the device inputs are rewritten in place (same shapes, new values) and it
// is replayed again. Each replay must equal the CPU backend run on the same inputs: the kernels
// read every count and flag from device memory when they run, not when they were captured.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_pair.h"
#include "device_buffer.h"
#include "device_state.h"
#include "kvcanary/kvcanary.h"
#include "owned_graph.h"
#include "step_inputs.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::CanaryState;
using testing::CudaStep;
using testing::HostTensor;
using testing::StepInputs;

// The world: requests in req_to_token rows 1..5 with 64 consecutive slots each; batch row 2 is
// padding. A K and a V half, each with one 32-byte real-KV source (plus 16 bytes of row padding),
// real-KV mode ALL, the token pool and both asserts' inputs on.
constexpr int64_t kBs = 6;
constexpr int64_t kWidth = 64;
constexpr int64_t kNumSlots = 1 + 5 * kWidth;
constexpr int64_t kNumTokens = 40;
const std::vector<int64_t> kRequestRows = {1, 2, 0, 3, 4, 5};

int64_t Slot(int64_t rp, int64_t pos) { return 1 + (rp - 1) * kWidth + pos; }
int64_t Token(int64_t rp, int64_t pos) { return 1000 * rp + 7 * pos + 3; }

testing::KvSourceInput Source(uint64_t seed) {
  testing::KvSourceInput source;
  source.bytes = HostTensor<uint8_t>({kNumSlots, 48});
  testing::Rng(seed).Fill(source.bytes.values());
  source.page_size = 1;
  source.num_bytes_per_token = 32;
  source.read_bytes = 32;
  return source;
}

// The inputs of a step with these lengths, padded to kNumTokens tokens. bump_row >= 0 moves that
// batch row's first new token one position ahead of its expected position.
StepInputs GraphStep(const std::vector<int64_t>& prefix, const std::vector<int64_t>& extend,
                     int64_t bump_row = -1, int64_t verify_capacity = 5 * kWidth) {
  testing::HalfInputs k{
      CanaryState(kNumSlots, 64), {Source(1)}, static_cast<int64_t>(CanaryLaunchTag::kTailKFull)};
  StepInputs in(std::move(k), testing::PlanBuffers(verify_capacity, 8));
  in.paired = testing::HalfInputs{
      CanaryState(kNumSlots, 1), {Source(2)}, static_cast<int64_t>(CanaryLaunchTag::kTailVFull)};
  in.mode = RealKvHashMode::kAll;
  in.req_pool_indices = HostTensor<int64_t>::Of(kRequestRows);
  in.prefix_lens = HostTensor<int64_t>::Of(prefix);
  in.extend_seq_lens = HostTensor<int64_t>::Of(extend);
  in.req_to_token = HostTensor<int32_t>({kBs, kWidth});
  HostTensor<int32_t> pool({kBs, kWidth});
  for (int64_t rp = 1; rp <= 5; ++rp) {
    for (int64_t pos = 0; pos < kWidth; ++pos) {
      in.req_to_token.at(rp, pos) = static_cast<int32_t>(Slot(rp, pos));
      pool.at(rp, pos) = static_cast<int32_t>(Token(rp, pos));
    }
  }
  in.pool = pool;
  in.valid_lens = HostTensor<int64_t>::Of(prefix);
  in.check_token = true;
  in.scratch = HostTensor<int64_t>({kBs + 1});

  std::vector<int64_t> ids, positions, slots;
  int64_t bump = -1;
  for (int64_t r = 0; r < kBs; ++r) {
    const int64_t rp = kRequestRows[r];
    if (r == bump_row) bump = static_cast<int64_t>(ids.size());
    for (int64_t pos = prefix[r]; rp != 0 && pos < prefix[r] + extend[r]; ++pos) {
      ids.push_back(Token(rp, pos));
      positions.push_back(pos);
      slots.push_back(Slot(rp, pos));
    }
  }
  in.input_ids = HostTensor<int64_t>({kNumTokens});
  in.positions = HostTensor<int64_t>({kNumTokens});
  in.out_cache_loc = HostTensor<int64_t>({kNumTokens});
  HostTensor<int64_t> expected_positions({kNumTokens});
  for (size_t i = 0; i < ids.size(); ++i) {
    in.input_ids[i] = ids[i];
    in.positions[i] = positions[i] + (static_cast<int64_t>(i) == bump ? 1 : 0);
    expected_positions[i] = positions[i];
    in.out_cache_loc[i] = slots[i];
  }
  in.expected_tokens = in.input_ids;
  in.expected_positions = expected_positions;
  return in;
}

template <typename T>
void Overwrite(HostTensor<T>& host, const HostTensor<T>& values) {
  ASSERT_EQ(host.shape(), values.shape());
  host = values;
}
template <typename T>
void Overwrite(testing::DeviceTensor<T>& device, const HostTensor<T>& values) {
  device.CopyFrom(values);
}

// Rewrites a step's per-forward inputs in place: same shapes, new values.
template <typename Step>
void LoadInputs(Step& step, const StepInputs& in) {
  Overwrite(step.prefix_lens, in.prefix_lens);
  Overwrite(step.extend_seq_lens, in.extend_seq_lens);
  Overwrite(*step.valid_lens, *in.valid_lens);
  Overwrite(step.input_ids, in.input_ids);
  Overwrite(step.positions, in.positions);
  Overwrite(step.out_cache_loc, in.out_cache_loc);
  Overwrite(*step.expected_tokens, *in.expected_tokens);
  Overwrite(*step.expected_positions, *in.expected_positions);
}

// How a step gets its verify entries: the plan's arrays, derived (the offsets-only plan and
// FusedVerify), or stored by a HEAD stage for it and a TAIL stage to read (derived when they do
// not fit).
enum class Entries { kPlanned, kFused, kStored };

// The step as the runtime enqueues it: plan, verify, write (kStored: a HEAD and a TAIL stage).
template <typename Step>
void EnqueueStep(const Step& step, cudaStream_t stream, Entries entries) {
  switch (entries) {
    case Entries::kPlanned:
      Plan(step.PlanArgsOf(), stream);
      Verify(step.VerifyArgsOf(), stream);
      break;
    case Entries::kFused:
      Plan(step.OffsetsOnlyPlanArgsOf(), stream);
      FusedVerify(step.FusedVerifyArgsOf(), stream);
      break;
    case Entries::kStored:
      FusedStage(step.FusedStageArgsOf(/*with_plan=*/true, /*stored=*/true), stream);
      FusedStage(step.FusedStageArgsOf(/*with_plan=*/false, /*stored=*/true), stream);
      return;
  }
  Write(step.WriteArgsOf(), stream);
}

class Stream {
 public:
  Stream() { KVC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

using Graph = testing::OwnedGraph;

// Captures the step on `stream` in global mode and instantiates the graph. An op that synchronised
// or otherwise broke the capture leaves the stream's capture invalidated and EndCapture failing.
void CaptureStep(const CudaStep& step, cudaStream_t stream, Entries entries, Graph& graph) {
  KVC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  std::string op_error;
  try {
    EnqueueStep(step, stream, entries);
  } catch (const std::exception& error) {
    op_error = error.what();
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t query = cudaStreamIsCapturing(stream, &status);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph.graph);
  if (!op_error.empty() || query != cudaSuccess || status != cudaStreamCaptureStatusActive) {
    ADD_FAILURE() << "the capture broke: op error '" << op_error << "', capture status "
                  << static_cast<int>(status) << " (1 = active, 2 = invalidated), query "
                  << cudaGetErrorString(query);
    throw std::runtime_error("capture failed");
  }
  KVC_CUDA_CHECK(end);
  KVC_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
}

class CudaGraph : public testing::DeviceTest {
 protected:
  // Step A (prefill) is captured; steps B (decode) and C (extend, with a corrupted record, the
  // chain-position assert switched on and one token out of place) replay the same graph.
  // With stored entries the arrays hold 33: step B's 31 entries fit them, step C's 36 do not.
  static void RunScenario(bool with_scratch, Entries entries = Entries::kPlanned) {
    const int64_t capacity = entries == Entries::kStored ? 33 : 5 * kWidth;
    StepInputs a = GraphStep(std::vector<int64_t>(kBs, 0), {8, 5, 3, 7, 2, 9}, -1, capacity);
    if (!with_scratch) a.scratch.reset();  // the plan allocates its own, stream-ordered
    const StepInputs b = GraphStep({8, 5, 0, 7, 2, 9}, std::vector<int64_t>(kBs, 1), -1, capacity);
    const StepInputs c =
        GraphStep({9, 6, 0, 8, 3, 10}, {2, 3, 1, 1, 4, 2}, /*bump_row=*/4, capacity);
    testing::CpuStep cpu(a);
    CudaStep cuda(a);
    Stream stream;
    {  // Warm up on a throwaway copy, as a runtime does before capturing: the first launches load
       // kernels and read device attributes.
      const CudaStep warm(a);
      EnqueueStep(warm, stream.get(), entries);
      KVC_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    }
    Graph graph;
    CaptureStep(cuda, stream.get(), entries, graph);
    testing::ExpectSameStates(cpu, cuda, "after capture (nothing ran)");

    auto replay = [&](const std::string& what) {
      KVC_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream.get()));
      KVC_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      EnqueueStep(cpu, nullptr, entries);
      testing::ExpectSamePlan(cpu.plan, cuda.plan.ToHost(), what);
      testing::ExpectSameStates(cpu, cuda, what);
    };
    replay("step A");
    // Tokens written, padding row aside (twice with stored entries: HEAD and TAIL write).
    EXPECT_EQ(cpu.primary.state.slot_run_counter[0], entries == Entries::kStored ? 62 : 31);

    LoadInputs(cpu, b);
    LoadInputs(cuda, b);
    replay("step B");
    EXPECT_EQ(cpu.primary.state.write_index[0], 0);

    // Token of request row 2, position 3: its successor's chain and the token check fail.
    const int64_t byte = Slot(2, 3) * kCanarySlotBytes;
    cpu.primary.state.canary[byte] ^= 1;
    CanaryState device = cuda.primary.state.ToHost();
    device.canary[byte] ^= 1;
    cuda.primary.state.canary.CopyFrom(device.canary);
    const HostTensor<int32_t> on = HostTensor<int32_t>::Of({1});
    cpu.primary.state.chain_assert = on;
    cpu.paired->state.chain_assert = on;
    cuda.primary.state.chain_assert.CopyFrom(on);
    cuda.paired->state.chain_assert.CopyFrom(on);
    LoadInputs(cpu, c);
    LoadInputs(cuda, c);
    replay("step C");
    EXPECT_GT(cpu.primary.state.write_index[0], 0) << "step C records rows";
  }
};

TEST_F(CudaGraph, CapturedStepReplaysWithNewDeviceInputs) { RunScenario(/*with_scratch=*/true); }

TEST_F(CudaGraph, PlanWithoutScratchCapturesItsAllocation) { RunScenario(/*with_scratch=*/false); }

TEST_F(CudaGraph, FusedVerifyStepReplaysWithNewDeviceInputs) {
  RunScenario(/*with_scratch=*/true, Entries::kFused);
}

TEST_F(CudaGraph, StagesStoringTheirEntriesReplayWithNewDeviceInputs) {
  RunScenario(/*with_scratch=*/true, Entries::kStored);
}

}  // namespace
}  // namespace kvcanary
