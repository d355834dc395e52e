// The CPU bench device: aligned heap memory, a steady clock around each repetition, and a 1 GiB
// memcpy split over the cores as the ceiling.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <thread>

#include "bench/device.h"
#include "bench/parallel.h"
#include "kvcanary/hash.h"

namespace kvcanary::bench {
namespace {

// The CPU ceiling copies at least 1 GiB, far more than any cache holds.
constexpr int64_t kCeilingBytes = int64_t{1} << 30;

// The value after "key<spaces>:" on the first line of `path` that starts with key, or "".
std::string ProcField(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// Copies src to dst with one memcpy per host thread: the ops run on every core (OpenMP), so the
// ceiling they are compared with must too.
void ParallelMemcpy(void* dst, const void* src, int64_t bytes) {
  ParallelChunks(bytes, [&](int, int64_t begin, int64_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                end - begin);
  });
}

class CpuDevice final : public BenchDevice {
 public:
  Device device() const override { return Device::CPU(); }
  StreamHandle stream() const override { return nullptr; }

  std::string MachineLine() const override {
    std::ostringstream line;
    std::string model = ProcField("/proc/cpuinfo", "model name");
    if (model.empty()) model = "unknown CPU";
    line << "CPU " << model << ", " << HostThreads() << " cores";
    const std::string mhz = ProcField("/proc/cpuinfo", "cpu MHz");
    if (!mhz.empty()) line << ", " << std::stoi(mhz) << " MHz";
    const std::string mem_kb = ProcField("/proc/meminfo", "MemTotal");
    if (!mem_kb.empty()) {
      char gib[32];
      std::snprintf(gib, sizeof(gib), "%.1f", std::stod(mem_kb) / (1024.0 * 1024.0));
      line << ", " << gib << " GiB RAM";
    }
    // The other work on the machine is part of what the numbers mean: two cores shared with a
    // compiler time very differently from two idle ones.
    std::ifstream loadavg("/proc/loadavg");
    double load = 0;
    if (loadavg >> load) line << ", load average " << load << " at start";
    return line.str();
  }

  void CopyToDevice(void* dst, const void* src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void Synchronize() override {}

  TimingStats Time(int warmup, int reps, const std::function<void()>& body) override {
    for (int i = 0; i < warmup; ++i) body();
    std::vector<double> samples(reps);
    for (int i = 0; i < reps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      body();
      const auto stop = std::chrono::steady_clock::now();
      samples[i] = std::chrono::duration<double, std::micro>(stop - start).count();
    }
    return Summarize(std::move(samples));
  }

  TimingStats TimeChainFloor(int reps, int64_t steps) override {
    volatile uint64_t sink = 0;  // keeps the loop alive
    return Time(1, reps, [&] {
      uint64_t running = ChainHeadHash();
      for (int64_t i = 0; i < steps; ++i) running = ChainStep(running, 1000 + i, i);
      sink = running;
    });
  }

  TimingStats TimeLoadedChain(int reps, int64_t steps) override {
    std::vector<int64_t> tokens(steps), positions(steps);
    for (int64_t i = 0; i < steps; ++i) {
      tokens[i] = 1000 + i;
      positions[i] = i;
    }
    volatile uint64_t sink = 0;
    return Time(1, reps, [&] {
      uint64_t running = ChainHeadHash();
      for (int64_t i = 0; i < steps; ++i) running = ChainStep(running, tokens[i], positions[i]);
      sink = running;
    });
  }

  TimingStats TimeGather(int reps, const GatherInputs& in) override {
    volatile uint64_t sink = 0;
    TimingStats best;
    for (const int64_t distance : kGatherPrefetchDistances) {
      const TimingStats stats = Time(1, reps, [&] { sink = GatherOnHost(in, distance); });
      if (best.reps == 0 || stats.median_us < best.median_us) best = stats;
    }
    return best;
  }

  TimingStats TimeLaunchFloor(int, int) override { return TimingStats{}; }

  Ceiling MeasureCeiling(int reps) override {
    std::shared_ptr<void> src = Allocate(kCeilingBytes);
    std::shared_ptr<void> dst = Allocate(kCeilingBytes);
    // Touch every page first so the timed copies measure bandwidth, not page faults.
    ParallelChunks(kCeilingBytes, [&](int, int64_t begin, int64_t end) {
      std::memset(static_cast<char*>(src.get()) + begin, 0x5A, end - begin);
      std::memset(static_cast<char*>(dst.get()) + begin, 0, end - begin);
    });
    Ceiling ceiling;
    ceiling.method = "memcpy 1 GiB split over " + std::to_string(HostThreads()) + " threads";
    ceiling.bytes_copied = kCeilingBytes;
    ceiling.time = Time(1, reps, [&] { ParallelMemcpy(dst.get(), src.get(), kCeilingBytes); });
    ceiling.gbps = GigabytesPerSecond(2 * kCeilingBytes, ceiling.time.median_us);
    return ceiling;
  }
};

}  // namespace

std::unique_ptr<BenchDevice> MakeCpuDevice() { return std::make_unique<CpuDevice>(); }

}  // namespace kvcanary::bench
