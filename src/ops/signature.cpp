#include "ops/signature.h"

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
    case Layout::kAny:
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

void CheckEach(Specs specs, unsigned checks) {
  for (const TensorSpec& spec : specs) {
    if (!spec.present()) continue;
    if (checks & kLayout) CheckLayout(spec);
    if (checks & kDType) check::HasDType(*spec.view, spec.dtype, spec.name);
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

}  // namespace kvcanary::sig
