// Strict conversions of the binding's non-tensor arguments: ints, flags, the stream handle and the
// attributes of SGLang's dataclasses. pybind11's own casters (and Python's int()) accept "16",
// 16.5 and True as ints and wrap or report out-of-range values without the kv-canary prefix; these
// refuse them with the library's wording: a wrong type raises kvcanary::Error of the kType
// category (KvCanaryTypeError), a value out of range the kValue one (ValueError).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvcanary::python {

// The Python type name messages report for `value` ("None" for None).
std::string TypeName(pybind11::handle value);

// A Python int (or numpy integer scalar), never a bool, float, str or tensor, within int64.
// "kv-canary: {name} must be an int, got {type}" / "... must fit in int64, got {value}".
int64_t Int64Arg(pybind11::handle value, std::string_view name);

// As Int64Arg, within int32.
int32_t Int32Arg(pybind11::handle value, std::string_view name);

// None, or what Int64Arg accepts.
std::optional<int64_t> OptionalInt64Arg(pybind11::handle value, std::string_view name);

// A hash input: an int in [-2**63, 2**64), negative values read as their two's complement.
uint64_t U64Arg(pybind11::handle value, std::string_view name);

// True or False only: "kv-canary: {name} must be a bool, got {type}".
bool BoolArg(pybind11::handle value, std::string_view name);

// A Python str: "kv-canary: {name} must be a str, got {type}".
std::string StrArg(pybind11::handle value, std::string_view name);

// A Python int or float (never a bool): "kv-canary: {name} must be a number, got {type}".
double NumberArg(pybind11::handle value, std::string_view name);

// A cudaStream_t given as an int handle in [0, 2**64) or an object with .cuda_stream.
std::uintptr_t StreamArg(pybind11::handle stream);

// `owner.attribute`; an object without it raises
// "kv-canary: {owner_name} must have attribute {attribute}, got {type}".
pybind11::object AttrOf(pybind11::handle owner, const char* attribute, std::string_view owner_name);

}  // namespace kvcanary::python
