// Config::fingerprint_layers over a 32-layer pool listed in k_layers / v_layers: "all" catches a
// byte of any layer, "layer0" (the default) fingerprints layer 0 alone and misses a deep layer;
// the address table is allocated once at install; the perturber flips any fingerprinted layer.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_engine.h"
#include "runtime/install_case.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

constexpr int64_t kLayers = 32;

FakeEngineOptions DeepOptions(FingerprintLayers layers, Device device) {
  FakeEngineOptions options = LogOptions(RealKvHashMode::kAll);
  options.layers = kLayers;
  options.device = device;
  options.config.fingerprint_layers = layers;
  return options;
}

// Serves a request, flips one K byte of `layer` in one of its prefix slots, serves on: the rows.
std::vector<ViolationRow> FlipAndServe(FakeEngine& engine, int64_t layer, int64_t* slot) {
  std::vector<ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const ViolationRow& row, int64_t) { rows.push_back(row); });
  engine.AddRequest(9);
  for (int i = 0; i < 2; ++i) engine.Step();
  *slot = engine.SlotOf(1, 4);
  engine.FlipKByte(*slot, 3, layer);
  for (int i = 0; i < 2; ++i) engine.Step();
  return rows;
}

TEST(FingerprintLayers, AllCatchesAByteOfLayer17) {
  for (const Device device : Devices()) {
    FakeEngine engine(DeepOptions(FingerprintLayers::kAll, device));
    int64_t slot = -1;
    const std::vector<ViolationRow> rows = FlipAndServe(engine, 17, &slot);
    ASSERT_FALSE(rows.empty()) << device.ToString();
    EXPECT_EQ(rows.front().slot_idx, slot);
    EXPECT_TRUE(rows.front().fail_reason_bits & FailReason::kVerifyRealKvHashMismatch);
  }
}

TEST(FingerprintLayers, Layer0MissesLayer17AndCatchesLayer0) {
  for (const Device device : Devices()) {
    FakeEngine deep(DeepOptions(FingerprintLayers::kLayer0, device));
    int64_t slot = -1;
    EXPECT_TRUE(FlipAndServe(deep, 17, &slot).empty()) << device.ToString();
    FakeEngine shallow(DeepOptions(FingerprintLayers::kLayer0, device));
    const std::vector<ViolationRow> rows = FlipAndServe(shallow, 0, &slot);
    ASSERT_FALSE(rows.empty()) << device.ToString();
    EXPECT_EQ(rows.front().slot_idx, slot);
  }
}

TEST(FingerprintLayers, TheAddressTablesAreAllocatedAtInstall) {
  FakeEngine layer0(DeepOptions(FingerprintLayers::kLayer0, Device::CPU()));
  FakeEngine all(DeepOptions(FingerprintLayers::kAll, Device::CPU()));
  // One int64 address per layer, for K and for V.
  EXPECT_EQ(all.canary->device_bytes() - layer0.canary->device_bytes(), 2 * kLayers * 8);
  EXPECT_TRUE(all.log.Contains("fingerprint_layers=all"));
}

TEST(FingerprintLayers, LayersOfAnotherLayoutAreRefusedByName) {
  for (const Device device : Devices()) {
    InstallCase c(device);
    c.config.real_data = RealKvHashMode::kAll;
    c.config.fingerprint_layers = FingerprintLayers::kAll;
    c.args.groups[0].bytes_per_token = 16;
    c.args.groups[0].k_layers.assign(6, c.table.View(DType::kUInt8, {32, 16}));
    c.args.groups[0].k_layers[5] = c.table.View(DType::kUInt8, {16, 32});
    EXPECT_EQ(c.Refusal(),
              "kv-canary: group FULL k_layers[5] must be laid out like group FULL k_layers[0] "
              "(dtype torch.uint8, shape (32, 16), strides (16, 1), device " +
                  device.ToString() + "), got dtype torch.uint8, shape (16, 32), strides (32, 1), "
                  "device " + device.ToString());
  }
}

// verify_backup re-hashes one host layer: refused only when more than one layer is fingerprinted.
TEST(FingerprintLayers, VerifyBackupNeedsOneFingerprintedLayer) {
  for (const FingerprintLayers layers : {FingerprintLayers::kLayer0, FingerprintLayers::kAll}) {
    InstallCase c(Device::CPU());
    c.config.real_data = RealKvHashMode::kAll;
    c.config.verify_backup = true;
    c.config.fingerprint_layers = layers;
    c.args.groups[0].bytes_per_token = 16;
    c.args.groups[0].k_layers.assign(6, c.table.View(DType::kUInt8, {32, 16}));
    if (layers == FingerprintLayers::kAll) {
      EXPECT_EQ(c.Refusal(),
                "kv-canary: verify_backup re-hashes one host layer; group FULL k_layers has 6 "
                "(give one layer, or turn verify_backup off)");
    } else {  // six listed, layer 0 alone fingerprinted
      EXPECT_NE(CanaryManager::Install(c.config, c.args), nullptr);
    }
  }
}

TEST(FingerprintLayers, ThePerturberFlipsAnyFingerprintedLayer) {
  PerturbConfig perturb = Fire(&PerturbConfig::real_kv_post_forward_prob, /*warmup_steps=*/0);
  FakeEngineOptions options = PerturbOptions(perturb);
  options.layers = kLayers;
  options.config.fingerprint_layers = FingerprintLayers::kAll;
  RecordedEngine run(options);
  Serve(run.engine, {9, 7}, 24);
  std::set<int> layers;
  for (const std::string& line : run.engine.log.lines) {
    const size_t at = line.find("source_idx=");
    if (line.find("perturb real_kv_post_forward: group=FULL") == std::string::npos) continue;
    layers.insert(std::stoi(line.substr(at + 11)));
  }
  ASSERT_FALSE(layers.empty());
  EXPECT_GE(*layers.rbegin(), kMaxRealKvSources);  // past the layers four sources could hold
  EXPECT_LT(*layers.rbegin(), kLayers);
  EXPECT_FALSE(run.recorder.rows.empty());  // and the flips are caught
}

}  // namespace
}  // namespace kvcanary::runtime
