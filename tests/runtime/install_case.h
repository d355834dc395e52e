// A valid install of one FULL group (K only) over a small req_to_token, for tests that change
// one argument and check the refusal: the message, nothing left allocated, nothing logged.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {

constexpr int64_t kSlots = 64;

// A valid install of one FULL group (K only) over a small req_to_token. The table view may claim
// a larger shape than its storage: install sizes buffers from the shape and never reads the table.
struct InstallCase {
  explicit InstallCase(Device device) : device(device), table(device, 4 * 8 * 16) {
    config.mode = Mode::kLog;
    args.device = device;
    args.req_to_token = table.View(DType::kInt32, {4, 8});
    GroupSpec full;
    full.kind = GroupKind::kFull;
    full.num_slots = kSlots;
    args.groups = {full};
    args.pool_slot_count = kSlots;
    args.max_prefill_tokens = 16;
    args.capacities = Capacities{64, 8, 16};
    args.log = &log;
  }

  // Installs; returns the error message, checking that the refusal left nothing allocated and
  // logged nothing.
  std::string Refusal() {
    const int64_t live_before = LiveBufferCount();
    const std::string message = ErrorMessage([&] { CanaryManager::Install(config, args); });
    EXPECT_EQ(LiveBufferCount(), live_before) << "a refused install kept buffers";
    EXPECT_FALSE(log.Contains("install_canary")) << "a refused install logged its install line";
    return message;
  }

  Device device;
  DeviceBuffer table;
  Config config;
  InstallArgs args;
  testing::CapturingLog log;
};

inline std::vector<Device> Devices() {
  std::vector<Device> devices = {Device::CPU()};
  if (CudaDeviceAvailable()) devices.push_back(Device::CUDA(0));
  return devices;
}

}  // namespace kvcanary::runtime
