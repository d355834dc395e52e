// CPU and CUDA implementations of device_memory.h. The CUDA branch uses the runtime API from host
// code, so this file builds with the host compiler; without KVC_HAVE_CUDA a CUDA device is an error.
#include "kvcanary/runtime/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "kvcanary/error.h"

#ifdef KVC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kvcanary::runtime {
namespace {

constexpr int64_t kAlignment = 256;

bool IsCuda(Device device) { return device.type == DeviceType::kCUDA; }

[[noreturn]] [[maybe_unused]] void NoCuda() {
  ThrowError("kv-canary: this build of kvcanary has no CUDA backend (built without the toolkit)");
}

#ifdef KVC_HAVE_CUDA
void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    ThrowError("kv-canary: ", what, " failed: ", cudaGetErrorString(status));
  }
}

// Makes `device` current for the scope, as every CUDA call below is device-relative.
class CurrentDevice {
 public:
  explicit CurrentDevice(Device device) {
    cudaGetDevice(&previous_);
    if (previous_ != device.index) Check(cudaSetDevice(device.index), "cudaSetDevice");
  }
  ~CurrentDevice() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};
#endif

}  // namespace

DeviceBuffer::DeviceBuffer(Device device, int64_t bytes, bool pinned)
    : bytes_(bytes), device_(device), pinned_(pinned && !IsCuda(device)) {
  if (bytes < 0) ThrowError("kv-canary: buffer size must be non-negative, got ", bytes);
  const int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) return;
  if (IsCuda(device)) {
#ifdef KVC_HAVE_CUDA
    CurrentDevice scope(device);
    Check(cudaMalloc(&data_, rounded), "cudaMalloc");
    Check(cudaMemset(data_, 0, rounded), "cudaMemset");
    return;
#else
    NoCuda();
#endif
  }
#ifdef KVC_HAVE_CUDA
  if (pinned_ && CudaDeviceAvailable()) {
    Check(cudaHostAlloc(&data_, rounded, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(data_, 0, rounded);
    return;
  }
#endif
  pinned_ = false;
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (data_ == nullptr) ThrowError("kv-canary: out of host memory allocating ", bytes, " bytes");
  std::memset(data_, 0, rounded);
}

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
    pinned_ = other.pinned_;
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (data_ == nullptr) return;
#ifdef KVC_HAVE_CUDA
  if (IsCuda(device_)) {
    cudaFree(data_);
  } else if (pinned_) {
    cudaFreeHost(data_);
  } else {
    std::free(data_);
  }
#else
  std::free(data_);
#endif
  data_ = nullptr;
}

TensorView DeviceBuffer::View(DType dtype, const std::vector<int64_t>& shape,
                              int64_t byte_offset) const {
  int64_t numel = 1;
  for (int64_t extent : shape) numel *= extent;
  if (byte_offset < 0 || byte_offset + numel * ItemSize(dtype) > bytes_) {
    ThrowError("kv-canary: a view of ", numel * ItemSize(dtype), " bytes at offset ", byte_offset,
               " does not fit a buffer of ", bytes_, " bytes");
  }
  return TensorView(static_cast<char*>(data_) + byte_offset, dtype, device_, shape);
}

void CopyBytesAsync(void* dst, const void* src, int64_t bytes, Device device,
                    StreamHandle stream) {
  if (bytes <= 0) return;
  if (!IsCuda(device)) {
    std::memmove(dst, src, bytes);
    return;
  }
#ifdef KVC_HAVE_CUDA
  CurrentDevice scope(device);
  Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync");
#else
  (void)stream;
  NoCuda();
#endif
}

void ZeroBytesAsync(void* dst, int64_t bytes, Device device, StreamHandle stream) {
  if (bytes <= 0) return;
  if (!IsCuda(device)) {
    std::memset(dst, 0, bytes);
    return;
  }
#ifdef KVC_HAVE_CUDA
  CurrentDevice scope(device);
  Check(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
#else
  (void)stream;
  NoCuda();
#endif
}

void SynchronizeStream(Device device, StreamHandle stream) {
  if (!IsCuda(device)) return;
#ifdef KVC_HAVE_CUDA
  CurrentDevice scope(device);
  Check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
#else
  (void)stream;
  NoCuda();
#endif
}

bool IsStreamCapturing(Device device, StreamHandle stream) {
  if (!IsCuda(device)) return false;
#ifdef KVC_HAVE_CUDA
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  Check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status),
        "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
#else
  (void)stream;
  return false;
#endif
}

bool CudaDeviceAvailable() {
#ifdef KVC_HAVE_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

OwnedStream::OwnedStream(Device device) : device_(device) {
  if (!IsCuda(device)) return;
#ifdef KVC_HAVE_CUDA
  CurrentDevice scope(device);
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = stream;
#else
  NoCuda();
#endif
}

OwnedStream::~OwnedStream() {
#ifdef KVC_HAVE_CUDA
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
#endif
}

DeviceEvent::DeviceEvent(Device device) : device_(device) {
  if (!IsCuda(device)) return;
#ifdef KVC_HAVE_CUDA
  CurrentDevice scope(device);
  cudaEvent_t event = nullptr;
  Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  event_ = event;
#else
  NoCuda();
#endif
}

DeviceEvent::~DeviceEvent() {
#ifdef KVC_HAVE_CUDA
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
#endif
}

void DeviceEvent::Record(StreamHandle stream) {
#ifdef KVC_HAVE_CUDA
  if (event_ != nullptr) {
    Check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)),
          "cudaEventRecord");
  }
#else
  (void)stream;
#endif
}

void DeviceEvent::BlockStream(StreamHandle stream) const {
#ifdef KVC_HAVE_CUDA
  if (event_ != nullptr) {
    Check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                              static_cast<cudaEvent_t>(event_), 0),
          "cudaStreamWaitEvent");
  }
#else
  (void)stream;
#endif
}

void DeviceEvent::Synchronize() const {
#ifdef KVC_HAVE_CUDA
  if (event_ != nullptr) {
    Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
  }
#endif
}

}  // namespace kvcanary::runtime
