// Keyword tables for the runtime's argument classes (kvcanary.runtime.Config, GroupSpec,
// ForwardBatch, ...): one row per field gives its keyword, how to read it back and how to convert
// a Python value into it with the strict scalars (scalars.h). One table serves the keyword
// constructor, the properties and repr(), so a field is declared once.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "scalars.h"

namespace kvcanary::python {

template <typename T>
struct Field {
  const char* name;
  std::function<pybind11::object(const T&)> get;
  std::function<void(T&, pybind11::handle)> set;
};

template <typename T>
using FieldTable = std::vector<Field<T>>;

template <typename T>
Field<T> Int64Field(const char* name, int64_t T::*member) {
  return {name, [member](const T& t) { return pybind11::int_(t.*member); },
          [member, name](T& t, pybind11::handle v) { t.*member = Int64Arg(v, name); }};
}

template <typename T>
Field<T> OptionalInt64Field(const char* name, std::optional<int64_t> T::*member) {
  return {name, [member](const T& t) { return pybind11::cast(t.*member); },
          [member, name](T& t, pybind11::handle v) { t.*member = OptionalInt64Arg(v, name); }};
}

template <typename T>
Field<T> BoolField(const char* name, bool T::*member) {
  return {name, [member](const T& t) { return pybind11::bool_(t.*member); },
          [member, name](T& t, pybind11::handle v) { t.*member = BoolArg(v, name); }};
}

template <typename T>
Field<T> NumberField(const char* name, double T::*member) {
  return {name, [member](const T& t) { return pybind11::float_(t.*member); },
          [member, name](T& t, pybind11::handle v) { t.*member = NumberArg(v, name); }};
}

template <typename T>
Field<T> StrField(const char* name, std::string T::*member) {
  return {name, [member](const T& t) { return pybind11::str(t.*member); },
          [member, name](T& t, pybind11::handle v) { t.*member = StrArg(v, name); }};
}

// Item `i` of the argument `name`, as messages name it: "groups[2]".
std::string ItemName(std::string_view name, size_t i);

// None or a DLPack tensor, kept as the Python object: imported when the runtime is called.
void CheckTensorArg(pybind11::handle value, std::string_view name);

template <typename T>
Field<T> TensorField(const char* name, pybind11::object T::*member) {
  return {name, [member](const T& t) { return t.*member; },
          [member, name](T& t, pybind11::handle v) {
            CheckTensorArg(v, name);
            t.*member = pybind11::reinterpret_borrow<pybind11::object>(v);
          }};
}

// A list or tuple of tensors (None = empty), at most `max_items`.
std::vector<pybind11::object> TensorListArg(pybind11::handle value, std::string_view name,
                                            size_t max_items);

template <typename T>
Field<T> TensorListField(const char* name, std::vector<pybind11::object> T::*member,
                         size_t max_items) {
  return {name, [member](const T& t) { return pybind11::cast(t.*member); },
          [member, name, max_items](T& t, pybind11::handle v) {
            t.*member = TensorListArg(v, name, max_items);
          }};
}

// A sequence of ints (a list, a tuple, or anything with .tolist(): numpy arrays, CPU tensors).
std::vector<int64_t> Int64ListArg(pybind11::handle value, std::string_view name);

template <typename T>
Field<T> Int64ListField(const char* name, std::vector<int64_t> T::*member) {
  return {name, [member](const T& t) { return pybind11::cast(t.*member); },
          [member, name](T& t, pybind11::handle v) { t.*member = Int64ListArg(v, name); }};
}

// A list or tuple of bound `Type` objects (copied out): "kv-canary: {name} must be a list of
// {type_name}, got ..." / "kv-canary: {name}[i] must be a {type_name}, got ...".
template <typename Type>
std::vector<Type> ObjectListArg(pybind11::handle value, const char* name, const char* type_name) {
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    ThrowTypeError("kv-canary: ", name, " must be a list of ", type_name, ", got ",
                   TypeName(value));
  }
  std::vector<Type> out;
  const pybind11::sequence items = pybind11::reinterpret_borrow<pybind11::sequence>(value);
  for (size_t i = 0; i < items.size(); ++i) {
    if (!pybind11::isinstance<Type>(items[i])) {
      ThrowTypeError("kv-canary: ", ItemName(name, i), " must be a ", type_name, ", got ",
                     TypeName(items[i]));
    }
    out.push_back(items[i].cast<Type>());
  }
  return out;
}

// Sets every keyword of `kwargs` through the table; an unknown keyword raises KvCanaryTypeError
// "kv-canary: <owner> got an unexpected keyword argument '<name>'". `target` is a copy the caller
// commits only when every keyword converted.
template <typename T>
void SetKeywords(T& target, const FieldTable<T>& table, const pybind11::dict& kwargs,
                 std::string_view owner) {
  for (const auto& [key, value] : kwargs) {
    const std::string name = pybind11::str(key);
    const Field<T>* field = nullptr;
    for (const Field<T>& row : table) {
      if (name == row.name) field = &row;
    }
    if (field == nullptr) {
      ThrowTypeError("kv-canary: ", owner, " got an unexpected keyword argument '", name, "'");
    }
    field->set(target, value);
  }
}

// "Owner(field=value, ...)" in table order.
template <typename T>
std::string ReprOf(const T& value, const FieldTable<T>& table, std::string_view owner) {
  std::string text = std::string(owner) + "(";
  for (size_t i = 0; i < table.size(); ++i) {
    text += (i ? ", " : "") + std::string(table[i].name) + "=" +
            std::string(pybind11::repr(table[i].get(value)));
  }
  return text + ")";
}

// Binds `cls` as a keyword-only class over `table`: __init__(**kwargs) (then `validate`, if
// given), one property per row (the setter converts like the constructor), __repr__.
template <typename T>
void BindKeywordClass(pybind11::class_<T>& cls, const FieldTable<T>* table, const char* owner,
                      std::function<void(const T&)> validate = nullptr) {
  namespace py = pybind11;
  cls.def(py::init([table, owner, validate](const py::args& args, const py::kwargs& kwargs) {
    if (!args.empty()) {
      ThrowTypeError("kv-canary: ", owner, " takes keyword arguments only, got ", args.size(),
                     " positional");
    }
    T value;
    SetKeywords(value, *table, kwargs, owner);
    if (validate) validate(value);
    return value;
  }));
  for (const Field<T>& row : *table) {
    cls.def_property(row.name, row.get, row.set);
  }
  cls.def("__repr__", [table, owner](const T& value) { return ReprOf(value, *table, owner); });
}

}  // namespace kvcanary::python
