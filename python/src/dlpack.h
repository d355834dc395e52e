// The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html): the minimal subset the binding
// reads, written from the public specification (dlpack.h v0.8 and v1.0 share DLTensor; v1.0 adds
// the versioned managed tensor with its read-only flag). Only the binding includes this header.
#pragma once

#include <cstdint>

extern "C" {

// DLDeviceType codes the binding maps; every other code becomes DeviceType::kOther.
inline constexpr int32_t kDLCPU = 1;
inline constexpr int32_t kDLCUDA = 2;

// DLDataTypeCode values.
inline constexpr uint8_t kDLInt = 0;
inline constexpr uint8_t kDLUInt = 1;
inline constexpr uint8_t kDLFloat = 2;
inline constexpr uint8_t kDLBfloat = 4;
inline constexpr uint8_t kDLBool = 6;
inline constexpr uint8_t kDLFloat8_e4m3fn = 10;
inline constexpr uint8_t kDLFloat8_e5m2 = 12;

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means compact row-major
  uint64_t byte_offset;
};

// Capsule name "dltensor" (pre-1.0 producers; renamed "used_dltensor" once consumed).
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

inline constexpr uint64_t kDLPackFlagReadOnly = uint64_t{1} << 0;

// Capsule name "dltensor_versioned" (renamed "used_dltensor_versioned" once consumed).
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // extern "C"
