// The engine's host pool for offload tests: layer-0 K and V of its host slots, filled from a
// FakeEngine's device pool as a KV backup does, and the engine options the offload tests share.
#pragma once

#include <cstring>

#include "runtime/fake_engine.h"

namespace kvcanary::runtime::testing {

constexpr int64_t kBytesPerToken = 32;

inline FakeEngineOptions BackupOptions(bool verify_backup) {
  FakeEngineOptions options;
  options.config.mode = Mode::kLog;
  options.config.real_data = RealKvHashMode::kPartial;
  options.config.enable_mha_v = true;
  options.config.verify_backup = verify_backup;
  options.bytes_per_token = kBytesPerToken;
  return options;
}

// The engine's host pool: layer-0 K and V of `slots` host slots.
class HostPool {
 public:
  explicit HostPool(int64_t slots)
      : slots_(slots),
        k_(Device::CPU(), slots * kBytesPerToken),
        v_(Device::CPU(), slots * kBytesPerToken) {}

  // Copies the KV bytes of device slot `device` into host slot `host`, as a KV backup does.
  void CopyFrom(const FakeEngine& engine, int64_t host, int64_t device) {
    std::memcpy(k_.data_as<uint8_t>() + host * kBytesPerToken,
                engine.KLayer0().data_as<uint8_t>() + device * kBytesPerToken, kBytesPerToken);
    std::memcpy(v_.data_as<uint8_t>() + host * kBytesPerToken,
                engine.VLayer0().data_as<uint8_t>() + device * kBytesPerToken, kBytesPerToken);
  }
  uint8_t* K(int64_t slot) { return k_.data_as<uint8_t>() + slot * kBytesPerToken; }
  uint8_t* V(int64_t slot) { return v_.data_as<uint8_t>() + slot * kBytesPerToken; }
  HostLayer0 Layer0() const {
    return HostLayer0{k_.View(DType::kUInt8, {slots_, kBytesPerToken}),
                      v_.View(DType::kUInt8, {slots_, kBytesPerToken})};
  }

 private:
  int64_t slots_;
  DeviceBuffer k_, v_;
};

}  // namespace kvcanary::runtime::testing
