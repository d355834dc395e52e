// An op's tensor arguments declared as a table, and the one engine that checks them.
//
// Each op lists its tensors once, in the order its documented checks name them
// (docs/validation.md): name, dtype, rank, expected sizes, layout rule, whether it may be absent
// and whether the op writes it. The engine runs the generic checks over that table and throws the
// generic messages (G1-G8, G10); an op's own checks (scalars, relations between sizes) stay in its
// file, between the engine's passes. A new generic check goes into the engine, so every op gets it
// at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <span>
#include <string_view>
#include <type_traits>

#include "kvcanary/tensor.h"

namespace kvcanary::sig {

// An expected size: anything, exactly n (G5), or at least n (G6).
struct Extent {
  enum class Kind : uint8_t { kAny, kExactly, kAtLeast };
  Kind kind = Kind::kAny;
  int64_t value = 0;
};
inline constexpr Extent Exactly(int64_t n) { return {Extent::Kind::kExactly, n}; }
inline constexpr Extent AtLeast(int64_t n) { return {Extent::Kind::kAtLeast, n}; }

enum class Layout : uint8_t {
  kContiguous,  // G1
  // req_to_token in the C++ API: a 2-D view with unit inner stride and row stride >= width (a
  // slice of a wider table); a tensor that is not 2-D must still be contiguous.
  kRowView,
};

struct TensorSpec {
  const TensorView* view = nullptr;
  std::string_view name;
  DType dtype = DType::kInt64;
  bool int32_or_int64 = false;  // either index dtype is accepted (a block table); dtype ignored
  int rank = 1;    // 1 or 2 (G3 / G4); 0 = not checked here
  Extent length;   // size(0), checked after the rank
  Extent columns;  // size(1) (G10), checked after the length
  Layout layout = Layout::kContiguous;
  bool required = true;  // an absent optional tensor skips every check
  bool output = false;   // the op writes it: must be writable (G8) and own its memory
  // An output may be exactly this input (same memory, shape and strides: an in-place call).
  std::string_view may_alias;

  bool present() const { return view->defined(); }
};

// Builders for the common rows of a table.
inline TensorSpec In(const TensorView& view, std::string_view name, DType dtype, int rank,
                     Extent length = {}) {
  TensorSpec spec;
  spec.view = &view;
  spec.name = name;
  spec.dtype = dtype;
  spec.rank = rank;
  spec.length = length;
  return spec;
}
inline TensorSpec Out(const TensorView& view, std::string_view name, DType dtype, int rank,
                      Extent length = {}) {
  TensorSpec spec = In(view, name, dtype, rank, length);
  spec.output = true;
  return spec;
}
// A row points at its tensor: a temporary would dangle.
TensorSpec In(const TensorView&& view, std::string_view, DType, int, Extent = {}) = delete;
TensorSpec Out(const TensorView&& view, std::string_view, DType, int, Extent = {}) = delete;
// An optional input or output: the same row with `required` off.
inline TensorSpec Optional(TensorSpec spec) {
  spec.required = false;
  return spec;
}

// A table of at most kMaxSpecs rows, built per call on the stack. Only the rows added are ever
// written or copied (validation runs on every op call: its cost is host time of every step).
class SpecList {
 public:
  static constexpr std::size_t kMaxSpecs = 24;

  SpecList() = default;
  SpecList(std::initializer_list<TensorSpec> specs) { Add(specs); }
  SpecList(const SpecList& other) { Add(other.all()); }
  SpecList& operator=(const SpecList& other) {
    size_ = 0;
    Add(other.all());
    return *this;
  }
  void Add(const TensorSpec& spec);
  void Add(std::span<const TensorSpec> specs);
  void Add(std::initializer_list<TensorSpec> specs) { Add(std::span(specs.begin(), specs.size())); }

  std::span<const TensorSpec> all() const { return {rows(), size_}; }
  operator std::span<const TensorSpec>() const { return all(); }  // NOLINT: a table is its rows

 private:
  static_assert(std::is_trivially_copyable_v<TensorSpec> &&
                std::is_trivially_destructible_v<TensorSpec>);
  TensorSpec* rows() { return std::launder(reinterpret_cast<TensorSpec*>(storage_)); }
  const TensorSpec* rows() const {
    return std::launder(reinterpret_cast<const TensorSpec*>(storage_));
  }
  alignas(TensorSpec) unsigned char storage_[kMaxSpecs * sizeof(TensorSpec)];
  std::size_t size_ = 0;
};

using Specs = std::span<const TensorSpec>;

// What one pass checks of each tensor; several bits check a tensor's items together, in this
// order, before moving to the next tensor.
enum Check : unsigned {
  kLayout = 1u << 0,  // G1, or the row-view rule
  kDType = 1u << 1,   // G2
  kShape = 1u << 2,   // G3/G4, then G5/G6, then G10
  kWhole = kLayout | kDType | kShape,
};

// "kv-canary: {name} is required, got None" for the first required tensor that is absent.
void CheckPresent(Specs specs);
// Every present tensor can be addressed: sizes >= 0, its byte span within int64, its data aligned
// for its dtype. Runs right after CheckPresent, before any check that reads sizes.
void CheckBounds(Specs specs);
// The same checks of one view outside any table (a real-KV source, a layer table).
void CheckViewBounds(const TensorView& view, std::string_view name);
// `checks` on each present tensor, in table order.
void CheckEach(Specs specs, unsigned checks);
// G7: every present tensor on `reference`'s device; messages call it `reference_name`.
void CheckSameDevice(const TensorView& reference, std::string_view reference_name, Specs specs);
// G8: every present output writable.
void CheckWritable(Specs specs);
// No output shares a byte with another output, nor with an input other than its may_alias input
// passed as the very same view.
void CheckNoOverlap(Specs specs);
// Where the tensors live, the last checks of every op: CheckSameDevice, CheckWritable, then
// CheckNoOverlap.
void CheckPlacement(const TensorView& reference, std::string_view reference_name, Specs specs);

}  // namespace kvcanary::sig
