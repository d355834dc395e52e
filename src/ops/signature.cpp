#include "ops/signature.h"

#include <algorithm>

#include "kvcanary/error.h"
#include "ops/check.h"

namespace kvcanary::sig {
namespace {

void CheckLayout(const TensorSpec& spec) {
  const TensorView& t = *spec.view;
  switch (spec.layout) {
    case Layout::kContiguous:
      check::Contiguous(t, spec.name);
      return;
    case Layout::kRowView:
      if (t.ndim() != 2) {
        check::Contiguous(t, spec.name);
        return;
      }
      if ((t.size(1) > 1 && t.stride(1) != 1) ||
          (t.size(0) > 1 && t.size(1) != 0 && t.stride(0) < t.size(1))) {
        ThrowError("kv-canary: ", spec.name, " must have stride 1 in its last dimension and a row ",
                   "stride >= its width, got shape ", t.ShapeString(), " strides ",
                   t.StridesString());
      }
      return;
  }
}

void CheckExtent(const TensorView& t, Extent extent, std::string_view name) {
  switch (extent.kind) {
    case Extent::Kind::kAny:
      return;
    case Extent::Kind::kExactly:
      check::HasLength(t, extent.value, name);
      return;
    case Extent::Kind::kAtLeast:
      check::HasMinLength(t, extent.value, name);
      return;
  }
}

void CheckShape(const TensorSpec& spec) {
  const TensorView& t = *spec.view;
  if (spec.rank == 1) check::Is1D(t, spec.name);
  if (spec.rank == 2) check::Is2D(t, spec.name);
  if (spec.rank == 0) return;
  CheckExtent(t, spec.length, spec.name);
  if (spec.columns.kind == Extent::Kind::kExactly) {
    check::HasColumns(t, spec.columns.value, spec.name);
  }
}

// The bytes a view can touch: [begin, begin + bytes). False when its sizes overflow int64.
bool ByteSpan(const TensorView& t, intptr_t* begin, int64_t* bytes) {
  int64_t numel = 1;
  int64_t low = 0;
  int64_t high = 0;
  for (int d = 0; d < t.ndim(); ++d) {
    const int64_t reach = t.size(d) - 1;
    int64_t step = 0;
    if (__builtin_mul_overflow(numel, t.size(d), &numel)) return false;
    if (reach >= 0 && __builtin_mul_overflow(reach, t.stride(d), &step)) return false;
    if (__builtin_add_overflow(step < 0 ? low : high, step, step < 0 ? &low : &high)) return false;
  }
  int64_t elements = 0;
  if (__builtin_sub_overflow(high, low, &elements) ||
      __builtin_add_overflow(elements, int64_t{1}, &elements) ||
      __builtin_mul_overflow(elements, ItemSize(t.dtype()), bytes)) {
    return false;
  }
  if (numel == 0) *bytes = 0;
  *begin = reinterpret_cast<intptr_t>(t.data()) + low * ItemSize(t.dtype());
  return true;
}

bool SameView(const TensorView& a, const TensorView& b) {
  if (a.data() != b.data() || a.dtype() != b.dtype() || a.ndim() != b.ndim()) return false;
  for (int d = 0; d < a.ndim(); ++d) {
    if (a.size(d) != b.size(d) || a.stride(d) != b.stride(d)) return false;
  }
  return true;
}

}  // namespace

void SpecList::Add(const TensorSpec& spec) {
  if (size_ == kMaxSpecs)
    ThrowError("kv-canary: internal: an op table has over ", kMaxSpecs, " rows");
  new (storage_ + size_ * sizeof(TensorSpec)) TensorSpec(spec);
  size_ += 1;
}

void SpecList::Add(std::span<const TensorSpec> specs) {
  for (const TensorSpec& spec : specs) Add(spec);
}

void CheckPresent(Specs specs) {
  for (const TensorSpec& spec : specs) {
    if (spec.required) check::Present(*spec.view, spec.name);
  }
}

void CheckViewBounds(const TensorView& t, std::string_view name) {
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.size(d) < 0) {
      ThrowError("kv-canary: ", name, " must have non-negative sizes, got shape ", t.ShapeString());
    }
  }
  intptr_t begin = 0;
  int64_t bytes = 0;
  if (!ByteSpan(t, &begin, &bytes)) {
    ThrowError("kv-canary: ", name, " must span at most 2^63 - 1 bytes, got shape ",
               t.ShapeString(), " strides ", t.StridesString());
  }
  const auto address = reinterpret_cast<uintptr_t>(t.data());
  if (bytes > 0 && address % static_cast<uintptr_t>(ItemSize(t.dtype())) != 0) {
    ThrowError("kv-canary: ", name, " data must be ", ItemSize(t.dtype()), "-byte aligned for ",
               DTypeName(t.dtype()), ", got address 0x", std::hex, address);
  }
}

void CheckBounds(Specs specs) {
  for (const TensorSpec& spec : specs) {
    if (spec.present()) CheckViewBounds(*spec.view, spec.name);
  }
}

void CheckEach(Specs specs, unsigned checks) {
  for (const TensorSpec& spec : specs) {
    if (!spec.present()) continue;
    if (checks & kLayout) CheckLayout(spec);
    if (checks & kDType) {
      if (spec.int32_or_int64) {
        check::HasIndexDType(*spec.view, spec.name);
      } else {
        check::HasDType(*spec.view, spec.dtype, spec.name);
      }
    }
    if (checks & kShape) CheckShape(spec);
  }
}

void CheckSameDevice(const TensorView& reference, std::string_view reference_name, Specs specs) {
  const Device device = reference.device();
  for (const TensorSpec& spec : specs) {
    if (spec.present() && !(spec.view->device() == device)) {
      ThrowError("kv-canary: ", spec.name, " must be on ", reference_name, "'s device ",
                 device.ToString(), ", got ", spec.view->device().ToString());
    }
  }
}

void CheckWritable(Specs specs) {
  for (const TensorSpec& spec : specs) {
    if (spec.output && spec.present()) check::Writable(*spec.view, spec.name);
  }
}

void CheckNoOverlap(Specs specs) {
  // Each span once (bounded: CheckBounds ran first); empty tensors overlap nothing.
  intptr_t begin[SpecList::kMaxSpecs] = {};
  int64_t bytes[SpecList::kMaxSpecs] = {};
  const size_t n = std::min(specs.size(), SpecList::kMaxSpecs);
  for (size_t i = 0; i < n; ++i) {
    if (specs[i].present()) ByteSpan(*specs[i].view, &begin[i], &bytes[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    const TensorSpec& out = specs[i];
    if (!out.output || bytes[i] == 0) continue;
    for (size_t j = 0; j < n; ++j) {
      const TensorSpec& other = specs[j];
      if (j == i || bytes[j] == 0 || (other.output && j < i)) continue;
      // In 128 bits: a span's start plus up to 2^63 - 1 bytes can pass the int64 range.
      const auto end_i = static_cast<__int128>(begin[i]) + bytes[i];
      const auto end_j = static_cast<__int128>(begin[j]) + bytes[j];
      if (begin[i] >= end_j || begin[j] >= end_i) continue;
      if (!other.output && other.name == out.may_alias && SameView(*out.view, *other.view))
        continue;
      ThrowError("kv-canary: ", out.name, " overlaps ", other.name,
                 " in memory; an output needs memory of its own");
    }
  }
}

void CheckPlacement(const TensorView& reference, std::string_view reference_name, Specs specs) {
  CheckSameDevice(reference, reference_name, specs);
  CheckWritable(specs);
  CheckNoOverlap(specs);
}

}  // namespace kvcanary::sig
