// The bench driver: sets each case up, checks it, times it.
#include "bench/runner.h"

#include <algorithm>
#include <cstdint>

#include "bench/byte_counts.h"
#include "bench/checks.h"
#include "bench/device_tensor.h"
#include "bench/input_sets.h"
#include "bench/layout.h"
#include "bench/parallel.h"
#include "bench/pool.h"
#include "bench/records.h"

namespace kvcanary::bench {
namespace {

constexpr int kWarmupReps = 2;
constexpr int kCeilingReps = 20;
constexpr size_t kMaxGraphs = 64;
constexpr uint64_t kSeed = 0x6B7663616E617279ull;  // "kvcanary"

OpResult WithBytes(const TimingStats& time, int64_t bytes, const Ceiling& ceiling) {
  OpResult result;
  result.time = time;
  result.bytes = bytes;
  result.gbps = GigabytesPerSecond(bytes, time.median_us);
  result.ceiling_percent = ceiling.gbps > 0 ? 100 * result.gbps / ceiling.gbps : 0;
  return result;
}

// Random slots for the gather ceiling, as many as the largest case verifies, and the pool's
// buffers a verify reads: the TAIL K canary records and the K tensor's strips.
class GatherSlots {
 public:
  GatherSlots(const Pool& pool, const Suite& suite, Rng& rng) {
    int64_t most = 1;
    for (const BenchCase& c : suite.cases) most = std::max(most, c.batch * c.prefix);
    std::vector<int64_t> host(static_cast<size_t>(most));
    for (int64_t& slot : host) slot = 1 + static_cast<int64_t>(rng.Below(suite.num_slots - 1));
    slots_ = DeviceTensor(pool.device(), DType::kInt64, {most});
    slots_.Upload(host.data(), most);
    sink_ = DeviceTensor(pool.device(), DType::kInt64, {1});
    inputs_.slots = static_cast<const int64_t*>(slots_.data());
    inputs_.entries = most;
    inputs_.records = static_cast<const uint8_t*>(pool.canary(CanaryLaunchTag::kTailKFull).data());
    inputs_.strips = static_cast<const uint8_t*>(pool.kv(0).data());
    inputs_.strip_stride = suite.real_kv_bytes_per_token;
    inputs_.out = static_cast<uint64_t*>(sink_.data());
  }
  const GatherInputs& inputs() const { return inputs_; }

 private:
  DeviceTensor slots_;
  DeviceTensor sink_;
  GatherInputs inputs_;
};

// Times one case in one mode. Every repetition takes the next set of the rotation, so the data
// it touches was last touched a whole cycle (>= kRotationBytes) ago, if ever since the check.
CaseResult TimeCase(BenchDevice& device, const BenchResults& results, const BenchCase& shape,
                    const std::vector<InputSet>& sets, RealData mode, const GatherInputs& gather,
                    const std::function<void(const std::string&)>& progress) {
  const StreamHandle stream = device.stream();
  const int tail_k = StepTagIndex(CanaryLaunchTag::kTailKFull);

  CaseResult result;
  result.shape = shape;
  result.real_data = mode;
  result.input_sets = static_cast<int64_t>(sets.size());
  result.verify_entries = sets[0].verify_entries;
  result.write_tokens = sets[0].write_tokens;
  // Every op is timed as graph replays on CUDA (plain calls on the CPU), so the numbers are device
  // time, not the host's validation and launch cost; one graph per set, up to a bound that keeps
  // capture quick.
  const int graphs = static_cast<int>(std::min<size_t>(sets.size(), kMaxGraphs));
  auto time = [&](const char* what, const std::function<void(const InputSet&)>& body) {
    progress(what);
    return device.TimeGraphs(results.warmup, results.reps, graphs,
                             [&](int b) { body(sets[b]); });
  };
  result.plan = time("plan", [&](const InputSet& set) { Plan(set.plan_args, stream); });
  const TimingStats verify =
      time("verify", [&](const InputSet& set) { Verify(set.verify_args[tail_k], stream); });
  result.offsets_plan =
      time("offsets plan", [&](const InputSet& set) { Plan(set.offsets_plan_args, stream); });
  const TimingStats fused_verify = time("fused verify", [&](const InputSet& set) {
    FusedVerify(set.fused_verify_args[tail_k], stream);
  });
  const TimingStats write =
      time("write", [&](const InputSet& set) { Write(set.write_args[tail_k], stream); });
  result.step =
      time("step", [&](const InputSet& set) { RunStep(set, stream, set.stores_entries); });
  // Where the runtime's default already stores its entries (the sets share the case's choice),
  // the step is the stored step: it is not timed twice.
  result.stored_step =
      sets[0].stores_entries
          ? result.step
          : time("stored step", [&](const InputSet& set) { RunStep(set, stream, /*store=*/true); });
  result.planned_step =
      time("planned step", [&](const InputSet& set) { RunPlannedStep(set, stream); });
  if (result.verify_entries > 0) {
    progress("gather ceiling");
    GatherInputs records = gather;
    records.entries = result.verify_entries;
    records.strips = nullptr;
    result.gather_records = device.TimeGather(results.reps, records);
    result.gather = result.gather_records;
    if (mode == RealData::kPartial) {
      records.strips = gather.strips;
      result.gather = device.TimeGather(results.reps, records);
    }
  }
  if (sets[0].write_tokens > 0 && result.verify_entries == 0) {
    progress("chain floor");
    result.chain_floor = device.TimeChainFloor(results.reps, result.write_tokens);
    progress("chain over loaded tokens");
    result.loaded_chain = device.TimeLoadedChain(results.reps, result.write_tokens);
  }

  // Bytes count per folded layer (Pool::FoldedLayers): a source spanning layers reads 16 of each.
  const int sources =
      mode == RealData::kPartial ? static_cast<int>(results.suite.fingerprint_layers) : 0;
  result.verify =
      WithBytes(verify, VerifyBytes(result.verify_entries, kCheckVerifyExpectedToken, sources),
                results.ceiling);
  result.fused_verify = WithBytes(
      fused_verify, FusedVerifyBytes(result.verify_entries, kCheckVerifyExpectedToken, sources),
      results.ceiling);
  result.write = WithBytes(write, WriteBytes(result.write_tokens, sources), results.ceiling);
  result.step_bytes = StepBytes(result.verify_entries, shape.batch,
                                result.write_tokens, kCheckVerifyExpectedToken, sources);
  result.step_floor_us =
      results.ceiling.gbps > 0 ? result.step_bytes / (results.ceiling.gbps * 1e3) : 0;
  return result;
}

}  // namespace

BenchResults RunSuite(BenchDevice& device, const Suite& suite, const RunOptions& options) {
  auto progress = [&](const std::string& what) {
    if (options.progress) options.progress(what);
  };
  BenchResults results;
  results.machine = device.MachineLine();
  results.device = options.device_name;
  results.suite = suite;
  results.reps = options.reps > 0 ? options.reps : suite.default_reps;
  results.warmup = kWarmupReps;

  // The ceiling first, while the pool is not allocated yet (the copy needs 2 GiB of its own), and
  // with a minimum of 20 repetitions whatever --reps says: each copies a gigabyte.
  const int ceiling_reps = std::min(results.reps, kCeilingReps);
  progress("ceiling: " + std::to_string(ceiling_reps) + " x 1 GiB copy");
  results.ceiling = device.MeasureCeiling(ceiling_reps);
  progress("allocating and filling the pool");
  Pool pool(device, suite, kSeed);
  Rng rng(kSeed);
  progress("host cost per op call");
  results.call_costs = MeasureCallCosts(device, pool, suite, rng, results.reps);
  progress("launch floor");
  results.launch_floor_one = device.TimeLaunchFloor(results.reps, 1);
  results.launch_floor_step = device.TimeLaunchFloor(results.reps, kStepLaunches);
  progress("random slots for the gather ceiling");
  const GatherSlots gather_slots(pool, suite, rng);

  const size_t total = suite.cases.size() * std::size(kRealDataModes);
  size_t done = 0;
  for (const BenchCase& shape : suite.cases) {
    const std::string name = shape.name;
    progress(name + ": writing valid records");
    const int64_t num_sets = NumInputSets(suite, shape);
    const CaseLayout layout(suite, shape, num_sets * shape.batch, rng);
    StoreRequestRows(pool, layout);
    const ValidRecordWriter writer(pool, layout);
    writer.Run(CanaryLaunchTag::kHeadKFull, RealData::kNone);
    writer.Run(CanaryLaunchTag::kHeadVFull, RealData::kNone);
    std::vector<InputSet> sets = MakeInputSets(pool, layout, num_sets);

    for (RealData mode : kRealDataModes) {
      // Appended piece by piece: `"[" + std::string&&` makes GCC 12 at -O3 report a false
      // -Wrestrict overlap inside libstdc++'s operator+ (its insert at position 0).
      std::string label = "[";
      label.append(std::to_string(++done)).append("/").append(std::to_string(total));
      label.append("] ").append(name).append(" ").append(RealDataName(mode));
      progress(label + ": checking");
      // TAIL records carry this mode's fingerprints.
      writer.Run(CanaryLaunchTag::kTailKFull, mode);
      writer.Run(CanaryLaunchTag::kTailVFull, mode);
      BindMode(sets, pool, mode);
      CheckCase(pool, layout, sets, mode);
      CaseResult result = TimeCase(device, results, shape, sets, mode, gather_slots.inputs(),
                                   [&](const std::string& what) {
                                     progress(label + ": timing " + what);
                                   });
      CheckNoViolations(pool, "after timing " + label);
      results.cases.push_back(result);
    }
  }
  progress("");
  return results;
}

}  // namespace kvcanary::bench
