// The environment-variable parser of the runtime (Config::FromEnv, PerturbConfig::FromEnv and the
// Parse* helpers): fuzzed values for the known variables. A parse either succeeds with a config
// that validates, or throws a kv-canary error; what a parse accepts reads back the same.
#include <cmath>
#include <map>
#include <string>

#include "kvcanary/runtime/config.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace {

using kvcanary::runtime::Config;
using kvcanary::runtime::PerturbConfig;

constexpr const char* kVariables[] = {"KVCANARY_MODE",
                                      "KVCANARY_REAL_DATA",
                                      "KVCANARY_SWEEP_INTERVAL",
                                      "KVCANARY_RING_CAPACITY",
                                      "KVCANARY_STATS_PRINT_EVERY_N_STEPS",
                                      "KVCANARY_ENABLE_WRITE_INPUT_ASSERT",
                                      "KVCANARY_ENABLE_VERIFY_TOKEN_ASSERT",
                                      "KVCANARY_ENABLE_TOKEN_ORACLE",
                                      "KVCANARY_ENABLE_MHA_V",
                                      "KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL",
                                      "KVCANARY_VERIFY_BACKUP",
                                      "KVCANARY_REPORT_UNTOUCHED_ROWS",
                                      "KVCANARY_ALLREDUCE_VIOLATION_SIGNAL",
                                      "KVCANARY_INCIDENT_FILE",
                                      "KVCANARY_FUSED_VERIFY",
                                      "KVCANARY_FINGERPRINT_LAYERS",
                                      "KVCANARY_VERIFY_ENTRIES",
                                      "KVCANARY_VERIFY_SAMPLE",
                                      "KVCANARY_ON_VIOLATION",
                                      "KVCANARY_JITTER_ENABLED",
                                      "KVCANARY_JITTER_PER_SLOT_FIRE_PROB",
                                      "KVCANARY_JITTER_MAX_CYCLES",
                                      "KVCANARY_JITTER_SEED",
                                      "KVCANARY_PERTURB_REQ_TO_TOKEN_PROB",
                                      "KVCANARY_PERTURB_REAL_KV_USED_PROB",
                                      "KVCANARY_PERTURB_REAL_KV_UNUSED_CACHE_PROB",
                                      "KVCANARY_PERTURB_REAL_KV_POST_FORWARD_PROB",
                                      "KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB",
                                      "KVCANARY_REAL_PERTURB_BYTES_PROB",
                                      "KVCANARY_REAL_PERTURB_BYTES_REQUIRE_ORPHAN",
                                      "KVCANARY_PERTURB_TARGET_GROUP",
                                      "KVCANARY_PERTURB_WARMUP_STEPS",
                                      "KVCANARY_PERTURB_SEED"};

void Fail(const char* what, const std::string& value) {
  std::fprintf(stderr, "fuzz: %s: '%s'\n", what, value.c_str());
  std::abort();
}

// Runs `parse`; a rejection must be a one-line kv-canary error.
template <typename Parse>
void Expect(Parse parse) {
  try {
    parse();
  } catch (const kvcanary::Error& error) {
    kvc_fuzz::RequirePrefix(error, "kv-canary: ");
  }
}

// What ParseInt and ParseNumber accept reads back as the same value once printed.
void CheckScalarParsers(const std::string& value) {
  Expect([&] {
    const std::optional<int64_t> parsed = kvcanary::runtime::ParseInt("V", value);
    if (parsed && kvcanary::runtime::ParseInt("V", std::to_string(*parsed)) != parsed) {
      Fail("ParseInt does not read back", value);
    }
  });
  Expect([&] {
    const std::optional<double> parsed = kvcanary::runtime::ParseNumber("V", value);
    if (parsed && std::isfinite(*parsed) &&
        kvcanary::runtime::ParseNumber("V", std::to_string(*parsed)) == std::nullopt) {
      Fail("ParseNumber refuses its own value", value);
    }
  });
  Expect([&] { kvcanary::runtime::ParseBool("V", value); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::map<std::string, std::string> env;
  while (in.remaining_bytes() > 0) {
    const size_t pick = in.ConsumeIntegralInRange<size_t>(0, std::size(kVariables));
    const std::string name =
        pick < std::size(kVariables) ? kVariables[pick] : in.ConsumeRandomLengthString(40);
    env[name] = in.ConsumeRandomLengthString(40);
    CheckScalarParsers(env[name]);
  }
  const kvcanary::runtime::EnvLookup lookup =
      [&env](const std::string& name) -> std::optional<std::string> {
    const auto found = env.find(name);
    if (found == env.end()) return std::nullopt;
    return found->second;
  };
  Expect([&] {
    const Config config = Config::FromEnv(lookup);
    config.Validate();  // what FromEnv returns validates
    if (config.ToString().empty()) Fail("empty Config::ToString", "");
  });
  Expect([&] {
    const PerturbConfig config = PerturbConfig::FromEnv(lookup);
    config.Validate();
    for (double p :
         {config.req_to_token_prob, config.real_kv_used_prob, config.real_kv_unused_cache_prob,
          config.real_kv_post_forward_prob, config.next_token_swap_prob,
          config.real_perturb_bytes_prob}) {
      if (!(p >= 0 && p <= 1))
        Fail("PerturbConfig accepted a probability outside [0, 1]", config.ToString());
    }
  });
  return 0;
}
