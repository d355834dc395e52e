// The simulator's options: a fuzzed scenario name, then fuzzed overrides of a preset's fields
// (directly, or as flag text through the flag table's parser, as `kvcanary sim` applies its
// flags), then ValidateOptions. Bad options must end in a one-line UsageError; options that
// validate resolve to fault classes that all apply.
#include <string>

#include "sim/sim_flags.h"
#include "sim/sim_options.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace {

using kvcanary::sim::SimOptions;

constexpr int64_t SimOptions::*kIntFields[] = {
    &SimOptions::steps,           &SimOptions::num_requests,    &SimOptions::num_slots,
    &SimOptions::num_layers,      &SimOptions::bytes_per_token, &SimOptions::max_running_reqs,
    &SimOptions::max_context_len, &SimOptions::chunk_size,      &SimOptions::prefill_token_budget,
    &SimOptions::swa_window,      &SimOptions::swa_num_slots,   &SimOptions::sweep_interval,
    &SimOptions::ring_capacity,   &SimOptions::fault_rate,      &SimOptions::block_size,
    &SimOptions::draft_forwards};
constexpr std::string SimOptions::*kStringFields[] = {&SimOptions::device, &SimOptions::mode,
                                                      &SimOptions::real_data, &SimOptions::faults,
                                                      &SimOptions::progress};

// A flag's value as the command line gives it, through the flag table's strict parser: an
// accepted integer lies in the flag's range, a refused text changes nothing.
void SetFlagText(FuzzedDataProvider& in, SimOptions& options) {
  const auto& table = kvcanary::sim::SimFlagTable();
  const kvcanary::sim::SimFlag& flag =
      table[in.ConsumeIntegralInRange<size_t>(0, table.size() - 1)];
  const std::string text = in.ConsumeRandomLengthString(24);
  const std::string before = kvcanary::sim::FlagValue(flag, options);
  try {
    kvcanary::sim::SetFlag(flag, text, options);
  } catch (const kvcanary::sim::UsageError&) {
    if (kvcanary::sim::FlagValue(flag, options) != before) {
      std::fprintf(stderr, "fuzz: --%s '%s' was refused but changed the option\n", flag.name,
                   text.c_str());
      std::abort();
    }
    throw;
  }
  if (flag.kind == kvcanary::sim::FlagKind::kInteger &&
      (options.*flag.integer < flag.min || options.*flag.integer > flag.max)) {
    std::fprintf(stderr, "fuzz: --%s '%s' accepted outside its range\n", flag.name, text.c_str());
    std::abort();
  }
}

void Override(FuzzedDataProvider& in, SimOptions& options) {
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      options.*kIntFields[in.ConsumeIntegralInRange<size_t>(0, std::size(kIntFields) - 1)] =
          // The whole int64 range: ValidateOptions bounds every flag first and checks its sums.
          in.ConsumeIntegral<int64_t>();
      break;
    case 1:
      options.*kStringFields[in.ConsumeIntegralInRange<size_t>(0, std::size(kStringFields) - 1)] =
          in.ConsumeRandomLengthString(32);
      break;
    case 2:
      (in.ConsumeBool() ? options.follow_up_prob : options.arrivals_per_step) =
          in.ConsumeFloatingPoint<double>();
      break;
    case 3:
      SetFlagText(in, options);
      break;
    default:
      (in.ConsumeBool() ? options.host_tier : options.pd) = in.ConsumeBool();
  }
}

void Check(const SimOptions& options) {
  kvcanary::sim::ValidateOptions(options);
  for (kvcanary::sim::FaultKind fault : kvcanary::sim::EnabledFaults(options)) {
    if (!kvcanary::sim::FaultApplies(fault, options)) {
      std::fprintf(stderr, "fuzz: enabled fault %s does not apply\n",
                   kvcanary::sim::FaultName(fault));
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string scenario = in.ConsumeRandomLengthString(16);
  if (auto fault = kvcanary::sim::ParseFault(scenario)) {
    if (scenario != kvcanary::sim::FaultName(*fault)) {
      std::fprintf(stderr, "fuzz: ParseFault('%s') names another fault\n", scenario.c_str());
      std::abort();
    }
  }
  try {
    const int overrides = in.ConsumeIntegralInRange(0, 4);
    for (const std::string& name : kvcanary::sim::ScenariosToRun(scenario)) {
      SimOptions options = kvcanary::sim::ScenarioPreset(name);
      for (int i = 0; i < overrides; ++i) Override(in, options);
      Check(options);
    }
  } catch (const kvcanary::sim::UsageError& error) {
    kvc_fuzz::RequirePrefix(error, "");
  }
  return 0;
}
