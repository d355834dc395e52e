// The device a benchmark runs on: its memory, its clock and its copy-bandwidth ceiling.
//
// Everything device-specific in the bench sits behind BenchDevice, so a CUDA device (device
// memory, CUDA-event timing, graph replay) is one more implementation in bench/ and the cases,
// the workload, the checks and the report stay as they are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/gather.h"
#include "kvcanary/tensor.h"

namespace kvcanary::bench {

// Median and spread of one timed loop, in microseconds.
struct TimingStats {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  int reps = 0;
};

// REQUIRES: samples_us non-empty. An even count takes the mean of the two middle samples.
TimingStats Summarize(std::vector<double> samples_us);

// GB/s (10^9 bytes per second) of `bytes` moved in `us` microseconds.
double GigabytesPerSecond(int64_t bytes, double us);

// The copy ceiling ops are compared with. Its bandwidth counts bytes read plus bytes written.
struct Ceiling {
  std::string method;        // what was copied, e.g. "memcpy 1 GiB split over 2 threads"
  int64_t bytes_copied = 0;  // one direction; the bandwidth counts twice this
  TimingStats time;
  double gbps = 0;
};

class BenchDevice {
 public:
  virtual ~BenchDevice() = default;

  virtual Device device() const = 0;
  virtual StreamHandle stream() const = 0;
  // The report's first line: the device and its size (CPU model and cores; GPU name, SMs, clock,
  // driver).
  virtual std::string MachineLine() const = 0;

  // `bytes` of zeroed memory on device(), 256-byte aligned: a runtime::DeviceBuffer, the one
  // allocator of the library, the runtime, the tests and the bench. Freed with the last owner.
  std::shared_ptr<void> Allocate(int64_t bytes);
  // Safe to call from several host threads at once on disjoint ranges.
  virtual void CopyToDevice(void* device_dst, const void* host_src, int64_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* device_src, int64_t bytes) = 0;
  // Waits until the work issued so far has finished (a no-op on the CPU).
  virtual void Synchronize() = 0;

  // Calls body() `warmup` times untimed, then `reps` times, clocking each call alone. body
  // enqueues (CUDA) or runs (CPU) one repetition of the work.
  virtual TimingStats Time(int warmup, int reps, const std::function<void()>& body) = 0;

  // Times a copy of at least the bench's ceiling size (1 GiB on the CPU, 4 GiB on CUDA).
  virtual Ceiling MeasureCeiling(int reps) = 0;

  // Times `reps` runs of body(i % num_bodies) the way the runtime runs a step: the CUDA device
  // captures each body once into a graph and times its replays; the CPU simply calls it.
  virtual TimingStats TimeGraphs(int warmup, int reps, int num_bodies,
                                 const std::function<void(int)>& body);

  // Times one thread stepping the chain hash `steps` times on registers and nothing else: the
  // serial floor of writing `steps` tokens of one request.
  virtual TimingStats TimeChainFloor(int reps, int64_t steps) = 0;

  // The same loop over tokens and positions read from memory (token 1000 + i at position i).
  virtual TimingStats TimeLoadedChain(int reps, int64_t steps) = 0;

  // The random-gather ceiling of `in` (gather.h): on CUDA the best median over several grids,
  // each timed as graph replays; on the CPU the best median over several prefetch distances, each
  // one pass over every core.
  virtual TimingStats TimeGather(int reps, const GatherInputs& in) = 0;
  // A graph of `launches` empty kernels in sequence, replayed (CUDA): the floor under a step of
  // that many launches. reps 0 (nothing measured) on the CPU, where a call has no launch.
  virtual TimingStats TimeLaunchFloor(int reps, int launches) = 0;
};

// The host: memory from the aligned heap, a steady clock, memcpy split over the cores.
std::unique_ptr<BenchDevice> MakeCpuDevice();
// The first CUDA device, or nullptr with `why_not` set when there is none.
std::unique_ptr<BenchDevice> MakeCudaDevice(std::string* why_not);

// The device named on the command line ("cpu" or "cuda"), or nullptr with `why_not` set when
// this build cannot bench it.
std::unique_ptr<BenchDevice> MakeBenchDevice(std::string_view name, std::string* why_not);

}  // namespace kvcanary::bench
