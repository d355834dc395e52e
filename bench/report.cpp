// Table and JSON rendering of bench results.
#include "bench/report.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/byte_counts.h"

namespace kvcanary::bench {
namespace {

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// Three significant figures or so, without wasting columns on large values.
std::string Us(double us) { return Format(us < 10 ? "%.2f" : (us < 1000 ? "%.1f" : "%.0f"), us); }

std::string Time(const TimingStats& t) {
  return Us(t.median_us) + " (" + Us(t.min_us) + "–" + Us(t.max_us) + ")";
}

std::string Bandwidth(const OpResult& op) { return op.bytes == 0 ? "–" : Format("%.2f", op.gbps); }

std::string Percent(const OpResult& op) {
  return op.bytes == 0 ? "–" : Format("%.1f", op.ceiling_percent);
}

nlohmann::ordered_json TimeJson(const TimingStats& t) {
  return {{"median_us", t.median_us}, {"min_us", t.min_us}, {"max_us", t.max_us}, {"reps", t.reps}};
}

nlohmann::ordered_json OpJson(const OpResult& op) {
  nlohmann::ordered_json json = TimeJson(op.time);
  json["bytes"] = op.bytes;
  json["gbps"] = op.gbps;
  json["ceiling_percent"] = op.ceiling_percent;
  return json;
}

// "a / b" as "1.23x", or "–" when b is 0.
std::string Ratio(double a, double b) { return b > 0 ? Format("%.2f", a / b) + "x" : "–"; }

// One row: what each op costs the host per call, before any of its work (see call_cost.h).
void PrintCallCosts(std::ostream& out, const std::vector<CallCost>& costs) {
  if (costs.empty()) return;
  out << "host cost per op call (checks, dispatch and launch of a one-token call; host clock):\n\n"
      << "| µs per call |";
  for (const CallCost& cost : costs) out << " " << cost.op << " |";
  out << "\n|---|";
  for (size_t i = 0; i < costs.size(); ++i) out << "--:|";
  out << "\n| one-token call |";
  for (const CallCost& cost : costs) out << " " << Time(cost.per_call) << " |";
  out << "\n\n";
}

// A step's limit: its four verifies' gathers (records only at HEAD, this mode's at TAIL) and the
// launch floor of its kStepLaunches launches; 0 when nothing was gathered.
double StepLimitUs(const CaseResult& r, const BenchResults& results) {
  if (r.gather.reps == 0) return 0;
  return 2 * r.gather_records.median_us + 2 * r.gather.median_us +
         results.launch_floor_step.median_us;
}

// The second table: each verifying case against the random-gather ceiling and the launch floor.
void PrintLimits(std::ostream& out, const BenchResults& results) {
  out << "\nlimits: gather = the random-gather ceiling of the case's entries (one random 32-byte "
         "record each, and one random 16-byte strip in partial, indices read in order; the best "
         "of several grids on CUDA, of several prefetch distances on the CPU); launch floor = a "
         "graph of empty kernels";
  if (results.launch_floor_one.reps > 0) {
    out << ": one " << Time(results.launch_floor_one) << " µs, " << kStepLaunches
        << " (a step's launches) " << Time(results.launch_floor_step) << " µs";
  } else {
    out << " (none on the CPU)";
  }
  out << "; step limit = 2 x gather of records (HEAD K, V) + 2 x gather (TAIL K, V) + the "
      << kStepLaunches << "-launch floor.\n\n";
  out << "| case | real KV | gather µs | verify / gather | fused verify / gather | step limit µs | "
         "step / limit |\n";
  out << "|---|---|--:|--:|--:|--:|--:|\n";
  for (const CaseResult& r : results.cases) {
    if (r.gather.reps == 0) continue;
    const double limit = StepLimitUs(r, results);
    out << "| " << r.shape.name << " | " << RealDataName(r.real_data) << " | " << Time(r.gather)
        << " | " << Ratio(r.verify.time.median_us, r.gather.median_us) << " | "
        << Ratio(r.fused_verify.time.median_us, r.gather.median_us) << " | " << Us(limit) << " | "
        << Ratio(r.step.median_us, limit) << " |\n";
  }
}

}  // namespace

void PrintTable(std::ostream& out, const BenchResults& results) {
  const Suite& suite = results.suite;
  const Ceiling& ceiling = results.ceiling;
  // Blank lines between the header lines keep them apart when the output is pasted as markdown.
  out << "machine: " << results.machine << "\n\n";
  out << "suite " << suite.name << " on " << results.device << ": pool " << suite.num_slots
      << " slots, req_to_token " << suite.req_to_token_rows << " x " << suite.req_to_token_cols
      << ", MHA FULL group, ring " << suite.ring_capacity;
  if (suite.fingerprint_layers > 1) out << ", partial folds " << suite.fingerprint_layers << " layers";
  out << "; median (min–max) of "
      << results.reps << " reps after " << results.warmup << " warm-up, µs\n\n";
  out << "ceiling: " << ceiling.method << ": " << Format("%.2f", ceiling.gbps)
      << " GB/s read+write, " << Time(ceiling.time) << " µs\n\n";
  PrintCallCosts(out, results.call_costs);
  out << "| case | real KV | entries | tokens | plan µs | verify µs | % ceil | offsets plan µs | "
         "fused verify µs | fused GB/s | % ceil | write µs | write GB/s | % ceil | step µs | "
         "step floor µs | step / floor | planned step µs | stored step µs | chain floor µs | "
         "loaded chain µs | write / chain |\n";
  out << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
         "\n";
  for (const CaseResult& r : results.cases) {
    out << "| " << r.shape.name << " | " << RealDataName(r.real_data) << " | " << r.verify_entries
        << " | " << r.write_tokens << " | " << Time(r.plan) << " | " << Time(r.verify.time) << " | "
        << Percent(r.verify) << " | " << Time(r.offsets_plan) << " | " << Time(r.fused_verify.time)
        << " | " << Bandwidth(r.fused_verify) << " | " << Percent(r.fused_verify) << " | "
        << Time(r.write.time) << " | " << Bandwidth(r.write) << " | " << Percent(r.write) << " | "
        << Time(r.step) << " | " << Format("%.1f", r.step_floor_us) << " | "
        << Ratio(r.step.median_us, r.step_floor_us) << " | " << Time(r.planned_step) << " | "
        << Time(r.stored_step) << " | " << (r.chain_floor.reps > 0 ? Time(r.chain_floor) : "–")
        << " | " << (r.loaded_chain.reps > 0 ? Time(r.loaded_chain) : "–") << " | "
        << (r.chain_floor.reps > 0 ? Ratio(r.write.time.median_us, r.chain_floor.median_us) : "–")
        << " |\n";
  }
  const int layers = static_cast<int>(suite.fingerprint_layers);  // partial's folded layers
  out << "\nentries = verify entries (batch x prefix), tokens = written tokens (batch x extend). "
         "verify, fused verify and write: the TAIL K launch; bytes per entry "
      << VerifyBytes(1, kCheckVerifyExpectedToken, 0) << " (none) / "
      << VerifyBytes(1, kCheckVerifyExpectedToken, layers) << " (partial) through the plan arrays, "
      << FusedVerifyBytes(1, kCheckVerifyExpectedToken, 0) << " / "
      << FusedVerifyBytes(1, kCheckVerifyExpectedToken, layers)
      << " fused (a req_to_token cell instead of a plan entry), per token " << WriteBytes(1, 0)
      << " / " << WriteBytes(1, layers)
      << ". step = the runtime's step: a FusedStage for HEAD (offsets plan, fused verify, write) "
         "and one for TAIL (fused verify, write), each over the K/V pair (one graph replay on "
         "CUDA), with the runtime's default (auto) way to get the verify entries: derived in "
         "each verify, or on the CPU in the *-paged and *-kK cases stored by HEAD after its "
         "plan and read by both verifies; step floor = its counted bytes over the ceiling; "
         "planned step = the same with the full plan and Verify; stored step = the step "
         "storing its entries (verify_entries store). chain "
         "floor = one thread stepping the chain hash once per written token (one-request "
         "prefills only): no write of those tokens can be faster. loaded chain = the same "
         "loop over tokens and positions read from memory, as every write reads them (on CUDA "
         "the floor's parameter-only inputs let the compiler use the uniform datapath; inputs "
         "from memory run on the vector datapath). *-paged: the same shape with its slots in "
         "blocks of "
      << kPagedBlockSize
      << " tokens, located through an int32 block table instead of req_to_token (byte counts "
         "as for req_to_token). *-kK: the same shape with sampled verify, verify_sample K at "
         "phase 0 (each request verifies about prefix / K records, in runs of 16, plus its "
         "newest); entries counts them.\n";
  PrintLimits(out, results);
}

void WriteJson(std::ostream& out, const BenchResults& results) {
  const Suite& suite = results.suite;
  nlohmann::ordered_json json;
  json["machine"] = results.machine;
  json["device"] = results.device;
  json["suite"] = {{"name", suite.name},
                   {"num_slots", suite.num_slots},
                   {"req_to_token_rows", suite.req_to_token_rows},
                   {"req_to_token_cols", suite.req_to_token_cols},
                   {"ring_capacity", suite.ring_capacity},
                   {"real_kv_bytes_per_token", suite.real_kv_bytes_per_token},
                   {"fingerprint_layers", suite.fingerprint_layers}};
  json["reps"] = results.reps;
  json["warmup"] = results.warmup;
  json["ceiling"] = TimeJson(results.ceiling.time);
  json["ceiling"]["method"] = results.ceiling.method;
  json["ceiling"]["bytes_copied"] = results.ceiling.bytes_copied;
  json["ceiling"]["gbps"] = results.ceiling.gbps;
  json["launch_floor"] = {{"one", TimeJson(results.launch_floor_one)},
                          {"step", TimeJson(results.launch_floor_step)}};
  json["call_costs"] = nlohmann::ordered_json::object();
  for (const CallCost& cost : results.call_costs) {
    json["call_costs"][cost.op] = TimeJson(cost.per_call);
  }
  json["cases"] = nlohmann::ordered_json::array();
  for (const CaseResult& r : results.cases) {
    json["cases"].push_back({{"case", r.shape.name},
                             {"batch", r.shape.batch},
                             {"prefix", r.shape.prefix},
                             {"extend", r.shape.extend},
                             {"real_kv", RealDataName(r.real_data)},
                             {"input_sets", r.input_sets},
                             {"verify_entries", r.verify_entries},
                             {"write_tokens", r.write_tokens},
                             {"plan", TimeJson(r.plan)},
                             {"verify", OpJson(r.verify)},
                             {"offsets_plan", TimeJson(r.offsets_plan)},
                             {"fused_verify", OpJson(r.fused_verify)},
                             {"write", OpJson(r.write)},
                             {"step", TimeJson(r.step)},
                             {"planned_step", TimeJson(r.planned_step)},
                             {"stored_step", TimeJson(r.stored_step)},
                             {"step_bytes", r.step_bytes},
                             {"step_floor_us", r.step_floor_us},
                             {"gather_records", TimeJson(r.gather_records)},
                             {"gather", TimeJson(r.gather)},
                             {"step_limit_us", StepLimitUs(r, results)},
                             {"chain_floor", TimeJson(r.chain_floor)},
                             {"loaded_chain", TimeJson(r.loaded_chain)}});
  }
  out << json.dump(2) << "\n";
}

}  // namespace kvcanary::bench
