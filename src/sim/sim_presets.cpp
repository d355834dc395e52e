// The simulator's scenario presets: each states only what it changes from the defaults.
#include <string>
#include <string_view>
#include <vector>

#include "sim/sim_options.h"

namespace kvcanary::sim {

std::vector<std::string> PresetNames() {
  return {"default", "swa", "offload", "pd", "paged", "eagle", "mla", "compressed", "soak"};
}

SimOptions ScenarioPreset(std::string_view name) {
  // `default` is the struct's defaults: each other preset states only what it changes.
  SimOptions o;
  o.scenario = std::string(name);
  if (name == "default") return o;
  if (name == "swa") {
    // A window much shorter than the prompts, so SWA slots really leave the window and are
    // reused. Chunks stay at the default 256: a prompt then prefills in one step and decodes are
    // not starved (the simulator does not mix prefill and decode rows in one batch).
    o.swa_window = 64;
    o.swa_num_slots = 4096;
    return o;
  }
  if (name == "offload") {
    // A device pool an eighth of the default with three times the shared prompts: the radix
    // cache evicts all the time, so restores from the host tier are frequent. The host tier is
    // small too: it moves its oldest pages down to L3, and prefix hits load them back.
    o.host_tier = true;
    o.host_slots = 512;
    o.l3_slots = 16384;
    o.num_slots = 1280;
    o.max_running_reqs = 12;
    o.num_system_prompts = 12;
    return o;
  }
  if (name == "pd") {
    o.pd = true;
    return o;
  }
  if (name == "paged") {
    // vLLM's layout: 16-token blocks, a [rows, max_blocks] block table, a prefix cache that
    // shares whole blocks only.
    o.block_size = 16;
    o.fingerprint_layers = "all";  // every layer of the pool, as k_layers lists them
    return o;
  }
  if (name == "eagle") {
    // Speculative decoding: each decode step runs three inner forwards, the accepted token's and
    // two drafts', so the canary verifies drafts written earlier in the same step.
    o.draft_forwards = 3;
    return o;
  }
  if (name == "mla") {
    // DeepSeek-style MLA: the canary's one half over the latent buffer (the K layers).
    o.pool_layout = "mla";
    return o;
  }
  if (name == "compressed") {
    // DeepSeek-V4 style: a compressed pool (one slot per 4 full slots) whose slots the canary
    // protects, reached from the full pool's slots through a table.
    o.compress_ratio = 4;
    return o;
  }
  if (name == "soak") {
    // No faults: any violation at all is a false positive. Long enough for slots to be reused
    // many times over and for hundreds of sweeps.
    o.faults = "none";
    o.steps = 6000;
    return o;
  }
  std::string valid;
  for (const std::string& preset : PresetNames()) valid += preset + ", ";
  throw UsageError("unknown scenario '" + std::string(name) + "' (valid: " + valid + "all)");
}

std::vector<std::string> ScenariosToRun(std::string_view name) {
  if (name == "all") return PresetNames();
  ScenarioPreset(name);  // throws for an unknown name
  return {std::string(name)};
}

}  // namespace kvcanary::sim
