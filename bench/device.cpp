// Device-independent timing helpers and the choice of device.
#include "bench/device.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::bench {

TimingStats Summarize(std::vector<double> samples_us) {
  std::sort(samples_us.begin(), samples_us.end());
  const size_t n = samples_us.size();
  TimingStats stats;
  stats.reps = static_cast<int>(n);
  stats.min_us = samples_us.front();
  stats.max_us = samples_us.back();
  stats.median_us =
      n % 2 == 1 ? samples_us[n / 2] : (samples_us[n / 2 - 1] + samples_us[n / 2]) / 2;
  return stats;
}

double GigabytesPerSecond(int64_t bytes, double us) {
  return us > 0 ? static_cast<double>(bytes) / (us * 1e3) : 0;
}

std::shared_ptr<void> BenchDevice::Allocate(int64_t bytes) {
  auto buffer = std::make_shared<runtime::DeviceBuffer>(device(), bytes);
  void* data = buffer->data();
  return std::shared_ptr<void>(std::move(buffer), data);  // owns the buffer, points at its bytes
}

TimingStats BenchDevice::TimeGraphs(int warmup, int reps, int num_bodies,
                                    const std::function<void(int)>& body) {
  int next = 0;
  return Time(warmup, reps, [&] { body(next++ % num_bodies); });
}

std::unique_ptr<BenchDevice> MakeBenchDevice(std::string_view name, std::string* why_not) {
  if (name == "cpu") return MakeCpuDevice();
  if (name == "cuda") {
#if defined(KVC_HAVE_CUDA)
    return MakeCudaDevice(why_not);
#else
    *why_not = "this build has no CUDA backend";
    return nullptr;
#endif
  }
  *why_not = "unknown device '" + std::string(name) + "'";
  return nullptr;
}

}  // namespace kvcanary::bench
