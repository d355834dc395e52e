// Shared helpers of the validation tests (test_validation_*.cpp): outputs poisoned with a byte
// pattern, views of the same memory re-typed onto another dtype or device or read with a stride,
// and the plan fixtures (req_to_token table, SWA LUT, expected-token pool) the plan stages share.
//
// Every view onto another device keeps host memory behind it: the ops must raise before they
// touch it, so no GPU is needed.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {

inline constexpr uint8_t kPoisonByte = 0x5A;
inline constexpr int64_t kPoison = 0x5A5A5A5A5A5A5A5A;

template <typename T>
void Poison(HostTensor<T>& t) {
  std::memset(t.data(), kPoisonByte, t.bytes());
}

template <typename T>
HostTensor<T> Poisoned(std::vector<int64_t> shape) {
  HostTensor<T> t(std::move(shape));
  Poison(t);
  return t;
}

// The same memory, claimed to live on `device`. The op must raise before it touches the memory,
// so no GPU is needed.
inline TensorView OnDevice(const TensorView& view, Device device) {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  for (int d = 0; d < view.ndim(); ++d) {
    shape.push_back(view.size(d));
    strides.push_back(view.stride(d));
  }
  return TensorView(view.data(), view.dtype(), device, shape, strides, view.writable());
}

inline TensorView OnCuda(const TensorView& view) { return OnDevice(view, Device::CUDA(0)); }

// A device no backend supports (DLPack's Metal), in every build.
inline Device UnsupportedDevice() { return Device{DeviceType::kOther, 0, 8}; }

// Moves every present view of `views` to `device`.
inline void MoveToDevice(Device device, std::initializer_list<TensorView*> views) {
  for (TensorView* t : views) {
    if (t->defined()) *t = OnDevice(*t, device);
  }
}

// The memory of `t` seen with another dtype or device (contiguous, writable). Host memory
// throughout: the op must raise before it reads or writes any of it.
template <typename T>
TensorView Recast(const HostTensor<T>& t, DType dtype, Device device = Device::CPU()) {
  return TensorView(const_cast<T*>(t.values().data()), dtype, device, t.shape());
}
template <typename T>
TensorView OnCuda(const HostTensor<T>& t) {
  return Recast(t, DTypeOf<T>(), Device::CUDA(0));
}

template <typename T>
int64_t NumElements(const HostTensor<T>& t) {
  return static_cast<int64_t>(t.bytes() / sizeof(T));
}

// The elements of `t`, for comparisons.
template <typename T>
std::vector<T> Values(const HostTensor<T>& t) {
  std::vector<T> out;
  for (int64_t i = 0; i < NumElements(t); ++i) out.push_back(t[i]);
  return out;
}

// A non-contiguous 1-D view: every other element of `backing`.
template <typename T>
TensorView EveryOther(const HostTensor<T>& backing) {
  return backing.view({NumElements(backing) / 2}, {2});
}

// `t` (1-D, >= 3 elements) read with stride 2: a view torch calls non-contiguous.
template <typename T>
TensorView Gapped(const HostTensor<T>& t) {
  return t.view({(t.shape()[0] + 1) / 2}, {2});
}

// The R3 message (also what V4 reports for a hand-built source).
inline std::string ReadBytesMessage(int64_t bytes_per_token, int64_t got) {
  return "kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in "
         "(0, num_bytes_per_token=" +
         std::to_string(bytes_per_token) + "], got " + std::to_string(got);
}

// An address as the alignment messages print it: lower-case hex digits, no "0x". Rows that name a
// pointer point into static buffers, whose addresses are fixed when the tables are built.
inline std::string AddressHex(const void* p) {
  std::ostringstream out;
  out << std::hex << reinterpret_cast<uintptr_t>(p);
  return out.str();
}

// Runs `op`, which must throw exactly `message`, and checks that `before` still holds.
template <typename Op>
void ExpectRaisesUnchanged(Op op, const ByteSnapshot& before, const std::string& message) {
  EXPECT_KVC_ERROR(op(), message);
  EXPECT_TRUE(before.Unchanged()) << "a rejected call wrote an output";
}

// ---------------------------------------------------------------------------------------------
// Plan fixtures: a [4, 8] req_to_token table, a 64-entry SWA LUT, verify capacity 16, write
// capacity 4.

inline constexpr int64_t kVerifyCapacity = 16;
inline constexpr int64_t kWriteCapacity = 4;
inline constexpr int64_t kLutBase = 1000;
inline constexpr int64_t kLutLen = 64;

// req_to_token[row, col], distinct per cell and below kLutLen.
inline int64_t TableSlot(int64_t row, int64_t col) { return 10 * row + col + 1; }
// The SWA LUT maps slot s to kLutBase + s, so every emitted slot shows it was translated.
inline int64_t Translated(int64_t slot) { return slot < 0 ? slot : kLutBase + slot; }
// The expected-token pool's value at (row, position).
inline int32_t PoolToken(int64_t row, int64_t position) {
  return static_cast<int32_t>(500 + 10 * row + position);
}

inline HostTensor<int32_t> MakeTable() {
  HostTensor<int32_t> table({4, 8});
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 8; ++c) table.at(r, c) = static_cast<int32_t>(TableSlot(r, c));
  }
  return table;
}

inline HostTensor<int64_t> MakeLut() {
  HostTensor<int64_t> lut({kLutLen});
  for (int64_t i = 0; i < kLutLen; ++i) lut[i] = kLutBase + i;
  return lut;
}

inline HostTensor<int32_t> MakePool() {
  HostTensor<int32_t> pool({4, 8});
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 8; ++c) pool.at(r, c) = PoolToken(r, c);
  }
  return pool;
}

// D10: the C++ API reads req_to_token through its row stride. This is a [4, 8] view with row
// stride 16 over a [4, 16] buffer (a slice of a wider table) whose columns 8-15 hold a marker
// that a reader ignoring the row stride would pick up.
struct WideTable {
  WideTable() : buffer({4, 16}, -77) {
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 8; ++c) buffer.at(r, c) = static_cast<int32_t>(TableSlot(r, c));
    }
  }
  TensorView Sliced() const { return buffer.view({4, 8}, {16, 1}); }
  HostTensor<int32_t> buffer;
};

// The D10 message for a req_to_token view with these strides over a [4, 8] shape.
inline std::string D10Message(const std::string& strides) {
  return "kv-canary: req_to_token must have stride 1 in its last dimension and a row stride >= "
         "its width, got shape (4, 8) strides " +
         strides;
}

}  // namespace kvcanary::testing
