// The CUDA bench device: device memory, CUDA events around each repetition on one stream (behind
// a hold kernel, so the host's enqueue time stays out of the interval), a 4 GiB
// device-to-device copy as the ceiling, and graph capture for timing a whole step as the runtime
// runs it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>

#include "bench/chain_floor.h"
#include "bench/device.h"
#include "bench/hold.h"

namespace kvcanary::bench {
namespace {

// The CUDA ceiling copies at least 4 GiB, far more than the L2 holds.
constexpr int64_t kCeilingBytes = int64_t{4} << 30;
// Longer than the host takes to enqueue the start event, the region and the stop event, so the
// region starts on the device right after the start event instead of waiting for the host.
constexpr double kHoldMicroseconds = 50;

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("kvcanary bench: ") + what + ": " +
                             cudaGetErrorString(error));
  }
}

class CudaDevice final : public BenchDevice {
 public:
  CudaDevice() {
    Check(cudaSetDevice(0), "cudaSetDevice");
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    Check(cudaEventCreate(&start_), "cudaEventCreate");
    Check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~CudaDevice() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::CUDA(0); }
  StreamHandle stream() const override { return stream_; }

  std::string MachineLine() const override {
    cudaDeviceProp prop{};
    Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int clock_khz = 0, driver = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDriverGetVersion(&driver);
    std::ostringstream line;
    line << "GPU " << prop.name << ", " << prop.multiProcessorCount << " SMs, "
         << clock_khz / 1000 << " MHz max clock, " << (prop.totalGlobalMem >> 30) << " GiB, L2 "
         << (prop.l2CacheSize >> 20) << " MB, driver " << driver / 1000 << "."
         << (driver % 1000) / 10;
    return line.str();
  }

  void CopyToDevice(void* dst, const void* src, int64_t bytes) override {
    Check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void CopyToHost(void* dst, const void* src, int64_t bytes) override {
    Check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void Synchronize() override { Check(cudaStreamSynchronize(stream_), "synchronize"); }

  TimingStats Time(int warmup, int reps, const std::function<void()>& body) override {
    for (int i = 0; i < warmup; ++i) body();
    Synchronize();
    std::vector<double> samples(reps);
    for (int i = 0; i < reps; ++i) {
      Check(static_cast<cudaError_t>(LaunchHold(kHoldMicroseconds, stream_)), "hold kernel");
      Check(cudaEventRecord(start_, stream_), "cudaEventRecord");
      body();
      Check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
      Check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
      float ms = 0;
      Check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
      samples[i] = 1e3 * ms;
    }
    Check(cudaGetLastError(), "a timed launch");
    return Summarize(std::move(samples));
  }

  TimingStats TimeGraphs(int warmup, int reps, int num_bodies,
                         const std::function<void(int)>& body) override {
    for (int b = 0; b < num_bodies; ++b) body(b);  // eager once: lazy module loads stay out
    Synchronize();
    std::vector<cudaGraphExec_t> graphs(num_bodies);
    for (int b = 0; b < num_bodies; ++b) {
      cudaGraph_t graph;
      Check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), "begin capture");
      body(b);
      Check(cudaStreamEndCapture(stream_, &graph), "end capture");
      Check(cudaGraphInstantiate(&graphs[b], graph, 0), "cudaGraphInstantiate");
      cudaGraphDestroy(graph);
    }
    int next = 0;
    const TimingStats stats = Time(warmup, reps, [&] {
      Check(cudaGraphLaunch(graphs[next++ % num_bodies], stream_), "cudaGraphLaunch");
    });
    for (cudaGraphExec_t exec : graphs) cudaGraphExecDestroy(exec);
    return stats;
  }

  TimingStats TimeChainFloor(int reps, int64_t steps) override {
    std::shared_ptr<void> out = Allocate(sizeof(uint64_t));
    return Time(1, reps, [&] {
      Check(static_cast<cudaError_t>(
                LaunchChainFloor(steps, static_cast<uint64_t*>(out.get()), stream_)),
            "chain floor");
    });
  }

  TimingStats TimeLoadedChain(int reps, int64_t steps) override {
    std::vector<int64_t> host(steps);
    std::shared_ptr<void> tokens = Allocate(8 * steps);
    std::shared_ptr<void> positions = Allocate(8 * steps);
    std::shared_ptr<void> out = Allocate(sizeof(uint64_t));
    for (int64_t i = 0; i < steps; ++i) host[i] = 1000 + i;
    CopyToDevice(tokens.get(), host.data(), 8 * steps);
    for (int64_t i = 0; i < steps; ++i) host[i] = i;
    CopyToDevice(positions.get(), host.data(), 8 * steps);
    return Time(1, reps, [&] {
      Check(static_cast<cudaError_t>(LaunchLoadedChain(
                static_cast<const int64_t*>(tokens.get()),
                static_cast<const int64_t*>(positions.get()), steps,
                static_cast<uint64_t*>(out.get()), stream_)),
            "loaded chain");
    });
  }

  TimingStats TimeGather(int reps, const GatherInputs& in) override {
    // The best grid for random reads depends on the GPU: a few multiples of the SM count.
    int sms = 0;
    Check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    TimingStats best;
    for (int per_sm : {1, 2, 4, 8, 16}) {
      const int64_t needed = (in.entries + kGatherThreads - 1) / kGatherThreads;
      const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(needed, int64_t{per_sm} * sms)));
      const TimingStats stats = TimeGraphs(1, reps, 1, [&](int) {
        Check(static_cast<cudaError_t>(LaunchGather(in, blocks, stream_)), "gather");
      });
      if (best.reps == 0 || stats.median_us < best.median_us) best = stats;
      if (blocks == needed) break;  // more blocks than entries need change nothing
    }
    return best;
  }

  TimingStats TimeLaunchFloor(int reps, int launches) override {
    return TimeGraphs(1, reps, 1, [&](int) {
      for (int i = 0; i < launches; ++i) {
        Check(static_cast<cudaError_t>(LaunchEmpty(stream_)), "empty kernel");
      }
    });
  }

  Ceiling MeasureCeiling(int reps) override {
    std::shared_ptr<void> src = Allocate(kCeilingBytes);
    std::shared_ptr<void> dst = Allocate(kCeilingBytes);
    Check(cudaMemsetAsync(src.get(), 0x5A, kCeilingBytes, stream_), "cudaMemset");
    Ceiling ceiling;
    ceiling.method = "cudaMemcpyAsync device-to-device 4 GiB";
    ceiling.bytes_copied = kCeilingBytes;
    ceiling.time = Time(2, reps, [&] {
      Check(cudaMemcpyAsync(dst.get(), src.get(), kCeilingBytes, cudaMemcpyDeviceToDevice,
                            stream_),
            "cudaMemcpyAsync");
    });
    ceiling.gbps = GigabytesPerSecond(2 * kCeilingBytes, ceiling.time.median_us);
    return ceiling;
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace

std::unique_ptr<BenchDevice> MakeCudaDevice(std::string* why_not) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    *why_not = "no CUDA device";
    return nullptr;
  }
  return std::make_unique<CudaDevice>();
}

}  // namespace kvcanary::bench
