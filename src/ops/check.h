// The generic validation messages of the ops layer (docs/validation.md), one helper each: the
// table engine of ops/signature.h throws through them, and the few checks outside a table use
// them directly. Each throws kvcanary::Error with the exact text; none reads tensor contents.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "kvcanary/tensor.h"

namespace kvcanary::check {

// kvcanary: a required tensor given as None. "kv-canary: {name} is required, got None"
void Present(const TensorView& t, std::string_view name);
// G1 "kv-canary: {name} must be contiguous"
void Contiguous(const TensorView& t, std::string_view name);
// G2 "kv-canary: {name} must have dtype {dtype}, got {actual}"
void HasDType(const TensorView& t, DType dtype, std::string_view name);
// G2 for a tensor of either index dtype: "kv-canary: {name} must have dtype torch.int32 or
// torch.int64, got {actual}"
void HasIndexDType(const TensorView& t, std::string_view name);
// G3 "kv-canary: {name} must be 1-D, got shape {shape}"
void Is1D(const TensorView& t, std::string_view name);
// G4 "kv-canary: {name} must be 2-D, got shape {shape}"
void Is2D(const TensorView& t, std::string_view name);
// G5 "kv-canary: {name} length must be {expected}, got {actual}" (after G3)
void HasLength(const TensorView& t, int64_t expected, std::string_view name);
// G6 "kv-canary: {name} length must be >= {minimum}, got {actual}" (after G3)
void HasMinLength(const TensorView& t, int64_t minimum, std::string_view name);
// G10 "kv-canary: {name} must have {n} columns, got shape {shape}" (after G4)
void HasColumns(const TensorView& t, int64_t columns, std::string_view name);
// G8 "kv-canary: {name} must be writable"
void Writable(const TensorView& t, std::string_view name);

// A tensor paired with the name messages give it.
using Named = std::pair<const TensorView*, std::string_view>;

// G7 for each present tensor of `tensors`: "kv-canary: {name} must be on {reference_name}'s
// device {ref_device}, got {device}".
void SameDevice(const TensorView& reference, std::string_view reference_name,
                std::initializer_list<Named> tensors);

}  // namespace kvcanary::check
