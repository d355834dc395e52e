#include "runtime/jitter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvcanary/spin_wait.h"

namespace kvcanary::runtime {

const char* JitterPointName(JitterPoint point) {
  switch (point) {
    case JitterPoint::kPreHead:
      return "pre_head";
    case JitterPoint::kPostHead:
      return "post_head";
    case JitterPoint::kPostAttn:
      return "post_attn";
    case JitterPoint::kPostTail:
      return "post_tail";
  }
  return "unknown";
}

JitterDraw::JitterDraw(double fire_prob, int64_t max_cycles, uint64_t seed)
    : fire_prob_(fire_prob), max_cycles_(max_cycles), rng_(seed) {}

JitterCycles JitterDraw::Next() {
  JitterCycles cycles{};
  const double log_span = std::log(static_cast<double>(max_cycles_) + 1.0);
  for (int64_t& value : cycles) {
    if (!(rng_.Uniform() < fire_prob_)) continue;
    const double ticks = std::floor(std::exp(rng_.Uniform() * log_span));
    // Rounding may reach max_cycles + 1 for a draw just below 1; exp(0) is exactly 1.
    value = ticks >= static_cast<double>(max_cycles_) ? max_cycles_
                                                      : std::max<int64_t>(1, int64_t(ticks));
  }
  return cycles;
}

JitterFuzzer::JitterFuzzer(const Config& config, Device device)
    : draw_(config.jitter_per_slot_fire_prob, config.jitter_max_cycles, config.jitter_seed),
      device_(device),
      cycles_(device, 8 * kNumJitterPoints) {
  for (int i = 0; i < 2; ++i) {
    staging_[i] = DeviceBuffer(Device::CPU(), 8 * kNumJitterPoints, /*pinned=*/true);
    copied_[i] = std::make_unique<DeviceEvent>(device);
  }
}

const JitterCycles& JitterFuzzer::StageStep(StreamHandle stream) {
  step_cycles_ = draw_.Next();
  const int slot = next_slot_;
  next_slot_ = 1 - slot;
  copied_[slot]->Synchronize();  // the copy of two steps ago; complete long before this
  std::memcpy(staging_[slot].data(), step_cycles_.data(), sizeof(step_cycles_));
  CopyBytesAsync(cycles_.data(), staging_[slot].data(), sizeof(step_cycles_), device_, stream);
  copied_[slot]->Record(stream);
  return step_cycles_;
}

void JitterFuzzer::Launch(JitterPoint point, StreamHandle stream) const {
  SpinWait(SpinWaitArgs{Cycles(point)}, stream);
}

TensorView JitterFuzzer::Cycles(JitterPoint point) const {
  return cycles_.View(DType::kInt64, {1}, 8 * static_cast<int64_t>(point));
}

}  // namespace kvcanary::runtime
