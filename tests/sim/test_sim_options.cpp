// Tests for sim/sim_options: fault names, applicability, presets and every validation message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "sim/sim_options.h"
#include "sim_options_test_util.h"

namespace kvcanary::sim {
namespace {

TEST(SimOptions, FaultNamesAreTheSpecTableInOrder) {
  const std::vector<std::string> spec = {
      "req_to_token",         "stride_view",          "wrong_stride_read", "real_kv_used",
      "real_kv_unused_cache", "real_kv_post_forward", "stale_slot_reuse",  "offload_drop",
      "pd_transfer_drop",     "swa_lut_stale",        "next_token_swap",   "position_skip",
      "block_table_swap",     "freed_block_reuse",    "real_kv_page",      "stale_out_cache_loc",
      "real_kv_deep_layer",   "l3_corrupt",           "l3_stale",
      "eagle_position_plus_one", "mla_latent_page",    "compressed_slot_stale"};
  const std::vector<FaultKind> all = AllFaults();
  ASSERT_EQ(all.size(), spec.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(FaultName(all[i]), spec[i]);
    const std::optional<FaultKind> parsed = ParseFault(spec[i]);
    ASSERT_TRUE(parsed.has_value()) << spec[i];
    EXPECT_EQ(*parsed, all[i]);
  }
}

TEST(SimOptions, ParseFaultRejectsAnythingButAnExactName) {
  for (const char* name : {"", "bogus", "REQ_TO_TOKEN", "req_to_token ", "all", "none", "req"}) {
    EXPECT_FALSE(ParseFault(name).has_value()) << "'" << name << "'";
  }
}

TEST(SimOptions, FaultsNeedingAnEnginePartApplyOnlyWithIt) {
  SimOptions options;
  options.swa_window = 0;
  options.host_tier = false;
  options.pd = false;
  options.sweep_interval = 0;
  EXPECT_FALSE(FaultApplies(FaultKind::kSwaLutStale, options));
  EXPECT_FALSE(FaultApplies(FaultKind::kOffloadDrop, options));
  EXPECT_FALSE(FaultApplies(FaultKind::kPdTransferDrop, options));
  EXPECT_FALSE(FaultApplies(FaultKind::kRealKvUnusedCache, options));
  options.swa_window = 32;
  options.host_tier = true;
  options.pd = true;
  options.sweep_interval = 4;
  EXPECT_TRUE(FaultApplies(FaultKind::kSwaLutStale, options));
  EXPECT_TRUE(FaultApplies(FaultKind::kOffloadDrop, options));
  EXPECT_TRUE(FaultApplies(FaultKind::kPdTransferDrop, options));
  EXPECT_TRUE(FaultApplies(FaultKind::kRealKvUnusedCache, options));
}

TEST(SimOptions, L3ClassesNeedTheHostTierAndL3) {
  SimOptions options;
  options.host_tier = true;
  for (FaultKind fault : {FaultKind::kL3Corrupt, FaultKind::kL3Stale}) {
    EXPECT_FALSE(FaultApplies(fault, options)) << FaultName(fault);
  }
  options.l3_slots = 1024;
  for (FaultKind fault : {FaultKind::kL3Corrupt, FaultKind::kL3Stale}) {
    EXPECT_TRUE(FaultApplies(fault, options)) << FaultName(fault);
  }
  options.faults = "l3_stale";
  EXPECT_EQ(ValidationError(options), "");
  options.l3_slots = 0;
  ExpectRejected(options, "l3_stale");
  ExpectRejected(options, "--host-tier with --l3-slots > 0");
  options.faults = "all";
  options.host_tier = false;
  options.l3_slots = 8;
  ExpectRejected(options, "--l3-slots 8 needs --host-tier");
  options.l3_slots = -1;
  ExpectRejected(options, "--l3-slots must be at least 0, got -1");
}

TEST(SimOptions, PagedClassesReplaceThePerTokenTableClasses) {
  const std::vector<FaultKind> paged = {FaultKind::kBlockTableSwap, FaultKind::kFreedBlockReuse,
                                        FaultKind::kRealKvPage, FaultKind::kStaleOutCacheLoc};
  const std::vector<FaultKind> per_token = {FaultKind::kReqToToken, FaultKind::kStrideView,
                                            FaultKind::kWrongStrideRead,
                                            FaultKind::kStaleSlotReuse};
  SimOptions options;
  for (FaultKind fault : paged) EXPECT_FALSE(FaultApplies(fault, options)) << FaultName(fault);
  for (FaultKind fault : per_token) EXPECT_TRUE(FaultApplies(fault, options)) << FaultName(fault);
  options.block_size = 16;
  for (FaultKind fault : paged) EXPECT_TRUE(FaultApplies(fault, options)) << FaultName(fault);
  for (FaultKind fault : per_token) EXPECT_FALSE(FaultApplies(fault, options)) << FaultName(fault);
  options.faults = "stride_view";
  ExpectRejected(options, "stride_view does not apply to this engine: it needs --block-size 0");
  options.block_size = 0;
  options.faults = "real_kv_page";
  ExpectRejected(options, "real_kv_page does not apply to this engine: it needs --block-size > 0");
}

TEST(SimOptions, ADeepLayerFaultNeedsMoreThanFourLayers) {
  SimOptions options;
  EXPECT_EQ(options.num_layers, 4);
  EXPECT_FALSE(FaultApplies(FaultKind::kRealKvDeepLayer, options));
  options.faults = "real_kv_deep_layer";
  ExpectRejected(options, "real_kv_deep_layer does not apply to this engine: it needs --layers > 4");
  options.num_layers = 5;
  EXPECT_TRUE(FaultApplies(FaultKind::kRealKvDeepLayer, options));
  EXPECT_EQ(ValidationError(options), "");
  options.block_size = 16;  // either layout
  EXPECT_TRUE(FaultApplies(FaultKind::kRealKvDeepLayer, options));
}

TEST(SimOptions, FingerprintLayersIsLayer0OrAll) {
  SimOptions options;
  EXPECT_EQ(options.fingerprint_layers, "layer0");
  options.fingerprint_layers = "all";
  EXPECT_EQ(ValidationError(options), "");
  options.fingerprint_layers = "every";
  ExpectRejected(options, "--fingerprint-layers must be one of layer0, all, got 'every'");
}

// Quarantine names the requests a violation touched, which the runtime only does in mode log.
TEST(SimOptions, OnViolationIsLogOrQuarantineWithModeLog) {
  SimOptions options;
  options.on_violation = "raise";  // the runtime's third policy is --mode raise here
  ExpectRejected(options, "--on-violation must be one of log, quarantine, got 'raise'");
  options.on_violation = "quarantine";
  for (const char* mode : {"none", "raise"}) {
    options.mode = mode;
    ExpectRejected(options,
                   std::string("--on-violation quarantine requires --mode log, got --mode ") + mode);
  }
  options.mode = "log";
  EXPECT_EQ(ValidationError(options), "");
  EXPECT_EQ(SimOptions().on_violation, "log");
}

TEST(SimOptions, RejectsABlockSizeThatDoesNotFitThePool) {
  SimOptions o;
  o.block_size = 24;  // 16384 slots are not whole blocks of 24
  ExpectRejected(o, "--num-slots 16384 must be a multiple of --block-size 24");
  o.block_size = 16;
  o.max_context_len = 1000;
  o.num_slots = 1008;  // 63 blocks, one of them padding: a 1000-token request needs 63
  ExpectRejected(o, "one full-context request needs 64 blocks (block 0 holds the padding slot)");
  o.num_slots = 1024;
  EXPECT_EQ(ValidationError(o), "");
  o.host_tier = true;
  ExpectRejected(o, "--block-size cannot be combined with --swa-window, --host-tier or --pd");
}

TEST(SimOptions, CanarySettingsDoNotMakeAFaultInapplicable) {
  // A pure-byte fault under real-data none (or no canary at all) is still injected: the report
  // must show it undetected rather than hide it.
  SimOptions options;
  options.real_data = "none";
  options.mode = "none";
  for (FaultKind fault : {FaultKind::kRealKvUsed, FaultKind::kRealKvPostForward,
                          FaultKind::kReqToToken, FaultKind::kNextTokenSwap}) {
    EXPECT_TRUE(FaultApplies(fault, options)) << FaultName(fault);
  }
  const std::vector<FaultKind> enabled = EnabledFaults(options);
  EXPECT_NE(std::find(enabled.begin(), enabled.end(), FaultKind::kRealKvUsed), enabled.end());
}

TEST(SimOptions, EnabledFaultsResolvesAllNoneAndLists) {
  SimOptions options = ScenarioPreset("default");
  options.faults = "all";
  const std::vector<FaultKind> all = EnabledFaults(options);
  // No SWA, host tier, L3, PD, block table, layer past the fourth, draft forward, MLA or
  // compressed pool in `default`.
  EXPECT_EQ(all.size(), AllFaults().size() - 13);
  for (FaultKind fault : all) EXPECT_TRUE(FaultApplies(fault, options)) << FaultName(fault);
  options.faults = "none";
  EXPECT_TRUE(EnabledFaults(options).empty());
  // Duplicates collapse and the order is FaultKind's, whatever the order given.
  options.faults = "position_skip,req_to_token,position_skip,";
  EXPECT_EQ(EnabledFaults(options),
            (std::vector<FaultKind>{FaultKind::kReqToToken, FaultKind::kPositionSkip}));
}

TEST(SimOptions, EveryPresetIsValidAndNamed) {
  const std::vector<std::string> names = PresetNames();
  EXPECT_EQ(names, (std::vector<std::string>{"default", "swa", "offload", "pd", "paged", "eagle",
                                             "mla", "compressed", "soak"}));
  for (const std::string& name : names) {
    const SimOptions options = ScenarioPreset(name);
    EXPECT_EQ(options.scenario, name);
    EXPECT_EQ(ValidationError(options), "") << name;
  }
}

TEST(SimOptions, PresetsExerciseWhatTheirNameSays) {
  auto enables = [](const std::string& name, FaultKind fault) {
    const std::vector<FaultKind> faults = EnabledFaults(ScenarioPreset(name));
    return std::find(faults.begin(), faults.end(), fault) != faults.end();
  };
  EXPECT_TRUE(enables("swa", FaultKind::kSwaLutStale));
  EXPECT_TRUE(enables("offload", FaultKind::kOffloadDrop));
  EXPECT_TRUE(enables("offload", FaultKind::kL3Corrupt));
  EXPECT_TRUE(enables("offload", FaultKind::kL3Stale));
  EXPECT_TRUE(enables("pd", FaultKind::kPdTransferDrop));
  EXPECT_TRUE(enables("paged", FaultKind::kBlockTableSwap));
  EXPECT_TRUE(enables("eagle", FaultKind::kEaglePositionPlusOne));
  EXPECT_FALSE(enables("default", FaultKind::kEaglePositionPlusOne));
  EXPECT_TRUE(enables("mla", FaultKind::kMlaLatentPage));
  EXPECT_TRUE(enables("mla", FaultKind::kReqToToken));
  EXPECT_EQ(EnabledFaults(ScenarioPreset("compressed")),
            std::vector<FaultKind>{FaultKind::kCompressedSlotStale});
  EXPECT_FALSE(enables("default", FaultKind::kMlaLatentPage));
  EXPECT_GT(ScenarioPreset("eagle").draft_forwards, 1);
  EXPECT_FALSE(enables("paged", FaultKind::kReqToToken));
  EXPECT_FALSE(enables("default", FaultKind::kSwaLutStale));
  const SimOptions def = ScenarioPreset("default");
  EXPECT_EQ(def.real_data, "partial");
  EXPECT_GT(def.sweep_interval, 0);
  EXPECT_TRUE(enables("default", FaultKind::kRealKvUnusedCache));
  const SimOptions soak = ScenarioPreset("soak");
  EXPECT_TRUE(EnabledFaults(soak).empty());
  EXPECT_GT(soak.steps, def.steps);
}

TEST(SimOptions, PresetsAreDistinct) {
  std::set<std::tuple<int64_t, bool, bool, std::string, int64_t, int64_t, int64_t, int64_t,
                     std::string, int64_t>>
      seen;
  for (const std::string& name : PresetNames()) {
    const SimOptions o = ScenarioPreset(name);
    EXPECT_TRUE(seen.insert({o.swa_window, o.host_tier, o.pd, o.faults, o.steps, o.num_slots,
                             o.block_size, o.draft_forwards, o.pool_layout, o.compress_ratio})
                    .second)
        << name << " repeats another preset";
  }
}

TEST(SimOptions, DraftForwardsRefuseTheLayoutsTheDraftsDoNotModel) {
  const std::string expected = "--draft-forwards cannot be combined with --block-size";
  SimOptions o = ScenarioPreset("eagle");
  o.block_size = 16;
  ExpectRejected(o, expected);
  o = ScenarioPreset("eagle");
  o.swa_window = 64;
  ExpectRejected(o, expected);
  o = ScenarioPreset("eagle");
  o.pd = true;
  ExpectRejected(o, expected);
  // Quarantine holds the accepted drafts back with the sampled token.
  o = ScenarioPreset("eagle");
  o.on_violation = "quarantine";
  EXPECT_EQ(ValidationError(o), "");
  o = ScenarioPreset("default");
  o.faults = "eagle_position_plus_one";
  ExpectRejected(o, "eagle_position_plus_one does not apply to this engine: it needs "
                    "--draft-forwards > 1");
  o.draft_forwards = 2;
  EXPECT_EQ(ValidationError(o), "");
}

TEST(SimOptions, UnknownScenarioIsAUsageErrorListingTheValidOnes) {
  EXPECT_THROW(ScenarioPreset("bogus"), UsageError);
  EXPECT_THROW(ScenarioPreset("all"), UsageError);  // a set of presets, not one
  try {
    ScenariosToRun("bogus");
    FAIL() << "no error";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("default, swa, offload, pd, paged, eagle, mla, compressed, soak, all"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(ScenariosToRun("all"), PresetNames());
  EXPECT_EQ(ScenariosToRun("pd"), std::vector<std::string>{"pd"});
}

}  // namespace
}  // namespace kvcanary::sim
