// CPU and CUDA implementations of device_memory.h. The CUDA branch uses the runtime API from host
// code, so this file builds with the host compiler; without KVC_HAVE_CUDA a CUDA device is an error.
#include "kvcanary/runtime/device_memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"

#ifdef KVC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kvcanary::runtime {
namespace {

constexpr int64_t kAlignment = 256;

// Host buffers from this size on are mapped from the kernel, whose fresh pages read as zero: no
// memset touches them, so a large workspace costs memory only where a step uses it, and one the
// machine cannot hold fails here with an error instead of the memset waking the OOM killer
// inside the engine's process.
constexpr int64_t kMappedBytes = int64_t{1} << 20;

// A buffer's size rounded up to kAlignment. The constructor refuses a size whose rounding would
// pass int64, so the same call in Release (noexcept through the destructor) cannot throw.
int64_t RoundedBytes(int64_t bytes) {
  return CheckedAdd("buffer size rounded to 256 bytes", bytes, kAlignment - 1) / kAlignment *
         kAlignment;
}

bool IsMapped(int64_t rounded) { return rounded >= kMappedBytes; }

// Frees unpinned host memory of `rounded` bytes as Allocate got it.
void FreeHost(void* data, int64_t rounded) {
  if (IsMapped(rounded)) {
    munmap(data, static_cast<size_t>(rounded));
  } else {
    std::free(data);
  }
}

// Buffers holding memory now, across all devices: what a refused install must leave unchanged.
std::atomic<int64_t> live_buffers{0};

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
  const int64_t rounded = RoundedBytes(bytes);
  if (rounded == 0) return;
  data_ = Allocate(rounded);
  live_buffers.fetch_add(1, std::memory_order_relaxed);
}

void* DeviceBuffer::Allocate(int64_t rounded) {
  void* data = nullptr;
  if (IsCuda(device_)) {
#ifdef KVC_HAVE_CUDA
    CurrentDevice scope(device_);
    Check(cudaMalloc(&data, rounded), "cudaMalloc");
    const cudaError_t zeroed = cudaMemset(data, 0, rounded);
    if (zeroed != cudaSuccess) cudaFree(data);
    Check(zeroed, "cudaMemset");
    return data;
#else
    NoCuda();
#endif
  }
#ifdef KVC_HAVE_CUDA
  if (pinned_ && CudaDeviceAvailable()) {
    Check(cudaHostAlloc(&data, rounded, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(data, 0, rounded);
    return data;
  }
#endif
  pinned_ = false;
  if (IsMapped(rounded)) {
    data = mmap(nullptr, static_cast<size_t>(rounded), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
      ThrowError("kv-canary: out of host memory allocating ", bytes_, " bytes");
    }
    return data;  // page-aligned, so kAlignment-aligned
  }
  data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) ThrowError("kv-canary: out of host memory allocating ", bytes_, " bytes");
  std::memset(data, 0, rounded);
  return data;
}

int64_t LiveBufferCount() { return live_buffers.load(std::memory_order_relaxed); }

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
  const int64_t rounded = RoundedBytes(bytes_);
#ifdef KVC_HAVE_CUDA
  if (IsCuda(device_)) {
    cudaFree(data_);
  } else if (pinned_) {
    cudaFreeHost(data_);
  } else {
    FreeHost(data_, rounded);
  }
#else
  FreeHost(data_, rounded);
#endif
  data_ = nullptr;
  live_buffers.fetch_sub(1, std::memory_order_relaxed);
}

TensorView DeviceBuffer::View(DType dtype, const std::vector<int64_t>& shape,
                              int64_t byte_offset) const {
  int64_t view_bytes = ItemSize(dtype);
  for (int64_t extent : shape) view_bytes = CheckedMul("buffer view bytes", view_bytes, extent);
  if (byte_offset < 0 || CheckedAdd("buffer view end", byte_offset, view_bytes) > bytes_) {
    ThrowError("kv-canary: a view of ", view_bytes, " bytes at offset ", byte_offset,
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

OwnedCudaHandle::OwnedCudaHandle(Device device, Kind kind) : kind_(kind) {
  if (!IsCuda(device)) return;
#ifdef KVC_HAVE_CUDA
  CurrentDevice scope(device);
  if (kind == Kind::kStream) {
    cudaStream_t stream = nullptr;
    Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    handle_ = stream;
  } else {
    cudaEvent_t event = nullptr;
    Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    handle_ = event;
  }
#else
  NoCuda();
#endif
}

OwnedCudaHandle::~OwnedCudaHandle() {
#ifdef KVC_HAVE_CUDA
  if (handle_ == nullptr) return;
  if (kind_ == Kind::kStream) {
    cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
  } else {
    cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
  }
#endif
}

void DeviceEvent::Record(StreamHandle stream) {
#ifdef KVC_HAVE_CUDA
  if (handle_ != nullptr) {
    Check(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream)),
          "cudaEventRecord");
  }
#else
  (void)stream;
#endif
}

void DeviceEvent::BlockStream(StreamHandle stream) const {
#ifdef KVC_HAVE_CUDA
  if (handle_ != nullptr) {
    Check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                              static_cast<cudaEvent_t>(handle_), 0),
          "cudaStreamWaitEvent");
  }
#else
  (void)stream;
#endif
}

void DeviceEvent::Synchronize() const {
#ifdef KVC_HAVE_CUDA
  if (handle_ != nullptr) {
    Check(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
  }
#endif
}

}  // namespace kvcanary::runtime
