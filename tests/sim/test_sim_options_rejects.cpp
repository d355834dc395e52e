// Tests for sim/sim_options: every refusal of ValidateOptions, with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "sim/sim_options.h"
#include "sim_options_test_util.h"

namespace kvcanary::sim {
namespace {

TEST(SimOptions, RejectsUnknownFaultListingTheValidOnes) {
  SimOptions o;
  o.faults = "req_to_token,bit_rot";
  ExpectRejected(o, "--faults: unknown fault 'bit_rot' (valid: all, none, req_to_token, ");
  ExpectRejected(o, "l3_stale, eagle_position_plus_one, mla_latent_page, compressed_slot_stale)");
  o.faults = ",";
  ExpectRejected(o, "--faults is empty");
}

TEST(SimOptions, RejectsAnExplicitFaultThatDoesNotApply) {
  SimOptions o;
  o.faults = "swa_lut_stale";
  ExpectRejected(o, "swa_lut_stale does not apply to this engine: it needs --swa-window > 0");
  o.faults = "offload_drop";
  ExpectRejected(o, "needs --host-tier");
  o.faults = "pd_transfer_drop";
  ExpectRejected(o, "needs --pd");
  o.faults = "real_kv_unused_cache";
  o.sweep_interval = 0;
  ExpectRejected(o, "needs --sweep-interval > 0");
  o.faults = "all";  // `all` silently keeps only what applies
  EXPECT_EQ(ValidationError(o), "");
  o.faults = "mla_latent_page";
  ExpectRejected(o, "needs --pool-layout mla with --block-size 0 and --compress-ratio 0");
  o.faults = "compressed_slot_stale";
  ExpectRejected(o, "needs --compress-ratio > 1");
  o.compress_ratio = 4;
  o.faults = "req_to_token";  // the canary of a compressed engine sees the compressed pool alone
  ExpectRejected(o, "req_to_token does not apply to this engine");
}

TEST(SimOptions, RejectsAPoolKindTheEngineCannotRun) {
  using Edit = void (*)(SimOptions&);
  const std::pair<Edit, const char*> cases[] = {
      {[](SimOptions& o) { o.pool_layout = "gqa"; },
       "--pool-layout must be one of mha, mla, got 'gqa'"},
      {[](SimOptions& o) { o.pool_layout = "mla", o.pd = true; },
       "--pool-layout mla cannot be combined with --pd"},
      {[](SimOptions& o) { o.compress_ratio = 1; },
       "--compress-ratio must be 0 (no compressed pool) or at least 2, got 1"},
      {[](SimOptions& o) { o.compress_ratio = 4, o.block_size = 16; },
       "--compress-ratio cannot be combined with --block-size, --swa-window, --host-tier, --pd, "
       "--draft-forwards or --pool-layout mla"},
  };
  for (const auto& [edit, message] : cases) {
    SimOptions o;
    edit(o);
    ExpectRejected(o, message);
  }
  // Quarantine recomputes the named requests of a compressed engine as of any other.
  SimOptions quarantine = ScenarioPreset("compressed");
  quarantine.on_violation = "quarantine";
  EXPECT_EQ(ValidationError(quarantine), "");
}

TEST(SimOptions, RejectsAWindowNotSmallerThanTheContext) {
  SimOptions o;
  o.max_context_len = 512;
  o.swa_window = o.max_context_len;
  ExpectRejected(o, "--swa-window 512 must be smaller than --context 512");
}

TEST(SimOptions, RejectsAnSwaPoolTooSmallForOneRequest) {
  SimOptions o;
  o.swa_window = 64;
  o.chunk_size = 64;
  o.swa_num_slots = 128;
  ExpectRejected(o, "--swa-slots 128 is too small: one request needs --swa-window 64");
  // Every running window plus a prefill budget must fit at once.
  o.max_running_reqs = 4;
  o.prefill_token_budget = 64;
  o.swa_num_slots = 4 * 65 + 64;
  ExpectRejected(o, "--swa-slots 324 is too small for --max-running 4 windows of 64");
  o.swa_num_slots = 4 * 65 + 64 + 1;
  EXPECT_EQ(ValidationError(o), "");
}

TEST(SimOptions, RejectsSwaWithHostTierOrPd) {
  SimOptions o = ScenarioPreset("swa");
  o.host_tier = true;
  ExpectRejected(o, "--swa-window cannot be combined with --host-tier or --pd");
  o.host_tier = false;
  o.pd = true;
  ExpectRejected(o, "--swa-window cannot be combined with --host-tier or --pd");
}

TEST(SimOptions, RejectsAPoolTooSmallForOneFullContextRequest) {
  SimOptions o;
  o.max_context_len = 512;
  o.num_slots = o.max_context_len;
  ExpectRejected(o, "--num-slots 512 is too small for --context 512");
  o.num_slots = o.max_context_len + 1;
  EXPECT_EQ(ValidationError(o), "");
}

TEST(SimOptions, RejectsBytesPerTokenNotAPositiveMultipleOf16) {
  for (int64_t bytes : {0, -16, 20, 8}) {
    SimOptions o;
    o.bytes_per_token = bytes;
    ExpectRejected(
        o, "--bytes-per-token must be a positive multiple of 16, got " + std::to_string(bytes));
  }
}

TEST(SimOptions, RejectsUnknownNamedValues) {
  SimOptions o;
  o.mode = "warn";
  ExpectRejected(o, "--mode must be one of none, log, raise, got 'warn'");
  o = SimOptions();
  o.real_data = "some";
  ExpectRejected(o, "--real-data must be one of none, partial, all, got 'some'");
  o = SimOptions();
  o.device = "tpu";
  ExpectRejected(o, "--device must be one of cpu, cuda, got 'tpu'");
  o = SimOptions();
  o.progress = "maybe";
  ExpectRejected(o, "--progress must be one of auto, on, off, got 'maybe'");
}

TEST(SimOptions, RejectsARunThatNeverEnds) {
  SimOptions o;
  o.steps = 0;
  o.num_requests = 0;
  ExpectRejected(o, "--steps and --requests are both 0");
  o.num_requests = 10;
  EXPECT_EQ(ValidationError(o), "");
  o.steps = -1;
  ExpectRejected(o, "--steps must be at least 0, got -1");
}

TEST(SimOptions, RejectsAWorkloadWhoseFirstTurnCannotFit) {
  SimOptions o;
  o.max_context_len = 150;  // the default workload may need 96 + 48 + 48 = 192
  ExpectRejected(o, "--context 150 is too small for the workload: a first turn may need 192");
  o.num_system_prompts = 0;  // without system prompts 96 tokens fit
  EXPECT_EQ(ValidationError(o), "");
}

TEST(SimOptions, RejectsBadWorkloadRangesAndProbabilities) {
  SimOptions o;
  o.max_new_tokens_min = 50;
  o.max_new_tokens_max = 10;
  ExpectRejected(o, "max new tokens: the range is empty (min 50 > max 10)");
  o = SimOptions();
  o.follow_up_prob = 1.5;
  ExpectRejected(o, "follow-up probability must be in [0, 1], got 1.5");
  o.follow_up_prob = std::nan("");
  ExpectRejected(o, "follow-up probability must be in [0, 1]");
}

TEST(SimOptions, RejectsArrivalRatesThatAreNotPositiveAndFinite) {
  for (double rate : {0.0, -1.0, 16.5, std::nan(""), HUGE_VAL}) {
    SimOptions o;
    o.arrivals_per_step = rate;
    ExpectRejected(o, "arrivals per step must be in (0, 16], got ");
  }
  SimOptions o;
  o.arrivals_per_step = 16;
  EXPECT_EQ(ValidationError(o), "");
}

TEST(SimOptions, RejectsNegativeCountsAndAnEmptyHostTier) {
  SimOptions o;
  o.fault_rate = -1;
  ExpectRejected(o, "--fault-rate must be at least 0, got -1");
  o = SimOptions();
  o.sweep_interval = -2;
  ExpectRejected(o, "--sweep-interval must be at least 0, got -2");
  o = SimOptions();
  o.verify_sample = 0;
  ExpectRejected(o, "--verify-sample must be at least 1, got 0");
  o.verify_sample = 65537;
  ExpectRejected(o, "--verify-sample must be at most 65536, got 65537");
  o = SimOptions();
  o.hold_back = -1;
  ExpectRejected(o, "--hold-back must be at least 0, got -1");
  o.hold_back = 65;
  ExpectRejected(o, "--hold-back must be at most 64, got 65");
  o.hold_back = 0;
  EXPECT_EQ(ValidationError(o), "");
  o = SimOptions();
  o.num_layers = 0;
  ExpectRejected(o, "--layers must be at least 1, got 0");
  o = SimOptions();
  o.host_tier = true;
  o.host_slots = 0;
  ExpectRejected(o, "--host-slots must be at least 1, got 0");
  o.host_tier = false;  // unused without the tier
  EXPECT_EQ(ValidationError(o), "");
}

TEST(SimOptions, JitterNeedsACanaryAndAPositiveMaximum) {
  SimOptions o;
  o.jitter = true;
  EXPECT_EQ(ValidationError(o), "");
  o.mode = "none";
  ExpectRejected(o, "--jitter requires --mode log or raise, got --mode none");
  o.jitter = false;  // the maximum is still checked, like every count
  o.mode = "log";
  o.jitter_max_cycles = 0;
  ExpectRejected(o, "--jitter-max-cycles must be at least 1, got 0");
  o.jitter_max_cycles = 100000001;
  ExpectRejected(o, "--jitter-max-cycles must be at most 100000000, got 100000001");
}

TEST(SimOptions, CudaDeviceIsRejectedOnlyWhenUnavailable) {
  SimOptions o;
  o.device = "cuda";
  if (runtime::CudaDeviceAvailable()) {
    EXPECT_EQ(ValidationError(o), "");
  } else {
    ExpectRejected(o, "--device cuda: no CUDA device is available");
  }
}

}  // namespace
}  // namespace kvcanary::sim
