// Decoding fuzz bytes into tensors with real host memory behind them (docs/fuzzing.md).
//
// Every view a target builds points into a buffer of exactly the bytes its shape and strides
// cover, so an op that accepts a wrong view and reads or writes past it is caught by ASan. Most
// tensors decode well-formed (the dtype, shape and device the call expects), so that the fuzzer
// reaches the kernels; one mutation byte per tensor breaks one aspect of it now and then. An input
// that runs out of bytes decodes as zeros: every tensor well-formed, every value 0.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <string_view>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/tensor.h"

namespace kvc_fuzz {

using kvcanary::Device;
using kvcanary::DeviceType;
using kvcanary::DType;
using kvcanary::TensorView;
using Shape = std::vector<int64_t>;

// Small values, so that indices land inside the small tables and meet their bounds; now and then
// an extreme one. A zero byte decodes as 0.
inline int64_t ConsumeValue(FuzzedDataProvider& in) {
  static constexpr int64_t kExtremes[] = {std::numeric_limits<int64_t>::min(),
                                          std::numeric_limits<int64_t>::max(),
                                          std::numeric_limits<int32_t>::min(),
                                          std::numeric_limits<int32_t>::max(),
                                          int64_t{1} << 32,
                                          4096,
                                          4097,
                                          -1};
  const uint8_t byte = in.ConsumeIntegral<uint8_t>();
  if (byte >= 240) return kExtremes[byte % 8];
  const int64_t small = byte % 24;
  return small >= 22 ? small - 24 : small;
}

// A size or stride: ConsumeValue, or now and then a value whose products and sums with others
// sit at the int64 limits (2^62 x 2 overflows, 2^31 x 2^32 does not).
inline int64_t ConsumeExtent(FuzzedDataProvider& in) {
  static constexpr int64_t kNearLimits[] = {
      int64_t{1} << 62,       (int64_t{1} << 62) + 1, -(int64_t{1} << 62), int64_t{1} << 31,
      (int64_t{1} << 61) - 1, int64_t{3} << 60,       INT64_MAX / 8 + 1,   INT64_MAX - 1};
  const uint8_t byte = in.ConsumeIntegral<uint8_t>();
  if (byte >= 224) return kNearLimits[byte % 8];
  return ConsumeValue(in);
}

// Owns every buffer of one call and can tell whether a rejected call left them all untouched.
class Arena {
 public:
  explicit Arena(FuzzedDataProvider& in) : in_(in) {}

  // A tensor the call expects to be `dtype` of `shape` (dense, CPU, writable), as decoded.
  TensorView Tensor(DType dtype, Shape shape) {
    const uint8_t mutation = in_.ConsumeIntegral<uint8_t>();
    if (mutation < 224) return Backed(dtype, Device::CPU(), shape, {}, true, nullptr);
    return Mutated(dtype, std::move(shape), mutation % 8);
  }
  // A tensor the call may leave absent: present when the next byte is odd.
  TensorView Optional(DType dtype, Shape shape) {
    if ((in_.ConsumeIntegral<uint8_t>() & 1) == 0) return TensorView();
    return Tensor(dtype, std::move(shape));
  }
  // Copies every buffer, for Unchanged().
  void Snapshot() { snapshot_ = buffers_; }
  bool Unchanged() const { return snapshot_ == buffers_; }

 private:
  TensorView Mutated(DType dtype, const Shape expected, int aspect);
  // `fallback_shape`: see Backed's definition; null for a view that is already dense and small.
  TensorView Backed(DType dtype, Device device, const Shape& shape, const Shape& strides,
                    bool writable, const Shape* fallback_shape);
  void Fill(std::vector<uint8_t>& bytes, DType dtype);

  FuzzedDataProvider& in_;
  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<std::vector<uint8_t>> snapshot_;
};

// The element range [lowest, highest] a view reaches, relative to its data pointer; false when
// a size is negative or the range overflows (such a view gets a token buffer: ops must refuse it).
inline bool Extent(const Shape& shape, const Shape& strides, int64_t* lowest, int64_t* highest) {
  *lowest = 0;
  *highest = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) return false;
    if (shape[d] == 0) {
      *lowest = *highest = 0;
      return true;
    }
    int64_t reach = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach)) return false;
    if (__builtin_add_overflow(reach < 0 ? *lowest : *highest, reach,
                               reach < 0 ? lowest : highest)) {
      return false;
    }
  }
  return true;
}

// Whether the view's byte range, in elements of `item` bytes, is representable: sizes >= 0 and
// no overflow, as the ops' span check counts it. Only a view that fails this must be refused by
// every op, so only such a view is left without real memory.
inline bool ExtentFits(const Shape& shape, const Shape& strides, int64_t item) {
  int64_t lowest = 0, highest = 0, elements = 0, bytes = 0;
  return Extent(shape, strides, &lowest, &highest) &&
         !__builtin_sub_overflow(highest, lowest, &elements) &&
         !__builtin_add_overflow(elements, int64_t{1}, &elements) &&
         !__builtin_mul_overflow(elements, item, &bytes);
}

inline Shape DenseStrides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * (shape[d] > 0 ? shape[d] : 1);
  return strides;
}

inline TensorView Arena::Backed(DType dtype, Device device, const Shape& shape,
                                const Shape& given_strides, bool writable,
                                const Shape* fallback_shape) {
  constexpr int64_t kMaxBytes = int64_t{1} << 16;
  const Shape strides = given_strides.empty() ? DenseStrides(shape) : given_strides;
  const int64_t item = kvcanary::ItemSize(dtype);
  int64_t lowest = 0, highest = 0, elements = 0;
  const bool backed = Extent(shape, strides, &lowest, &highest) &&
                      !__builtin_sub_overflow(highest, lowest, &elements) &&
                      elements < kMaxBytes / item;
  // A valid view too large to back here would be a caller's lie, not a bug the op can catch:
  // that mutation falls back to the dense view of the shape the call expects.
  if (!backed && fallback_shape != nullptr && ExtentFits(shape, strides, item)) {
    return Backed(dtype, device, *fallback_shape, {}, writable, nullptr);
  }
  const int64_t bytes = backed ? (elements + 1) * item : 64;
  std::vector<uint8_t>& buffer = buffers_.emplace_back(static_cast<size_t>(bytes));
  Fill(buffer, dtype);
  uint8_t* data = buffer.data() + (backed ? -lowest * item : 0);
  return TensorView(data, dtype, device, shape, strides, writable);
}

inline void Arena::Fill(std::vector<uint8_t>& bytes, DType dtype) {
  const int64_t item = kvcanary::ItemSize(dtype);
  const bool integral = dtype == DType::kInt64 || dtype == DType::kInt32 || dtype == DType::kInt16;
  for (size_t at = 0; at + item <= bytes.size() && in_.remaining_bytes() > 0; at += item) {
    if (integral) {
      const int64_t value = ConsumeValue(in_);
      std::memcpy(&bytes[at], &value, item);  // little-endian: the low bytes
    } else {
      for (int64_t b = 0; b < item; ++b) bytes[at + b] = in_.ConsumeIntegral<uint8_t>();
    }
  }
}

// One aspect of the expected tensor broken: the dtype, the device, a size, the strides (and now
// and then a size with them), read-only, another rank, or absent.
inline TensorView Arena::Mutated(DType dtype, const Shape expected, int aspect) {
  Shape shape = expected;
  Device device = Device::CPU();
  Shape strides;
  bool writable = true;
  switch (aspect) {
    case 0:
      dtype = static_cast<DType>(in_.ConsumeIntegralInRange<int>(0, 14));
      break;
    case 1:
      device = in_.ConsumeBool() ? Device::CUDA(0) : Device{DeviceType::kOther, 0, 9};
      break;
    case 2:
      if (!shape.empty()) {
        const size_t d = in_.ConsumeIntegralInRange<size_t>(0, shape.size() - 1);
        shape[d] = in_.ConsumeBool() ? shape[d] + in_.ConsumeIntegralInRange<int64_t>(-2, 2)
                                     : ConsumeExtent(in_);
      }
      break;
    case 3:
      // Strides, and now and then one size with them: a stride-0 view of a huge length spans a
      // few bytes, so it passes the bounds check and reaches the checks after it.
      for (size_t d = 0; d < shape.size(); ++d) strides.push_back(ConsumeExtent(in_));
      if (!shape.empty() && in_.ConsumeBool()) {
        shape[in_.ConsumeIntegralInRange<size_t>(0, shape.size() - 1)] = ConsumeExtent(in_);
      }
      break;
    case 4:
      writable = false;
      break;
    case 5:
      shape.resize(in_.ConsumeIntegralInRange<size_t>(0, 3), in_.ConsumeIntegralInRange(0, 5));
      break;
    default:
      return TensorView();
  }
  return Backed(dtype, device, shape, strides, writable, &expected);
}

// Aborts unless the message of `error` starts with `prefix` and says something after it.
inline void RequirePrefix(const std::exception& error, std::string_view prefix) {
  const std::string_view message = error.what();
  if (message.rfind(prefix, 0) != 0 || message.size() == prefix.size()) {
    std::fprintf(stderr, "fuzz: message does not start with '%.*s': %s\n",
                 static_cast<int>(prefix.size()), prefix.data(), error.what());
    std::abort();
  }
}

// Runs one op call (KVC_FUZZ_VERBOSE set: prints why it was refused). A call may succeed or throw
// kvcanary::Error; a rejection must name itself
// ("kv-canary: ...") and leave every buffer as it was. Anything else aborts, which libFuzzer
// reports with the input.
inline void CallOp(Arena& arena, const std::function<void()>& op) {
  arena.Snapshot();
  try {
    op();
  } catch (const kvcanary::Error& error) {
    if (std::getenv("KVC_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", error.what());
    RequirePrefix(error, "kv-canary: ");
    if (!arena.Unchanged()) {
      std::fprintf(stderr, "fuzz: rejected call changed a buffer: %s\n", error.what());
      std::abort();
    }
  }
}

}  // namespace kvc_fuzz
