// Checked int64 arithmetic for every size or index derived from outside data (tensor shapes,
// engine arguments, environment variables). A product or sum past int64 would wrap into a small or
// negative size and then into an out-of-bounds access; these helpers turn it into a
// kvcanary::Error that names the quantity instead. The Try* forms return nullopt for callers
// that branch (saturate, skip) rather than refuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "kvcanary/error.h"

namespace kvcanary {

inline std::optional<int64_t> TryMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

inline std::optional<int64_t> TryAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// a + b clamped to the int64 range: for a bound that is compared with a size before the size's
// own checks ran (a size that large belongs to a view its span check refuses anyway).
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  return TryAdd(a, b).value_or(b > 0 ? INT64_MAX : INT64_MIN);
}

namespace checked_detail {

// Folds `operands` with `step` (TryMul or TryAdd); on overflow throws
// "kv-canary: <what> overflows: a <op> b [<op> c ...]" listing every operand.
template <size_t N, typename Step>
int64_t Fold(std::string_view what, const char* op, const int64_t (&operands)[N], Step step) {
  static_assert(N >= 2, "a checked expression needs at least two operands");
  int64_t result = operands[0];
  for (size_t i = 1; i < N; ++i) {
    const std::optional<int64_t> next = step(result, operands[i]);
    if (!next.has_value()) {
      std::ostringstream expression;
      expression << operands[0];
      for (size_t j = 1; j < N; ++j) expression << ' ' << op << ' ' << operands[j];
      ThrowError("kv-canary: ", what, " overflows: ", expression.str());
    }
    result = *next;
  }
  return result;
}

}  // namespace checked_detail

// The product of every factor. Throws "kv-canary: <what> overflows: a * b [* c ...]".
template <typename... Ints>
int64_t CheckedMul(std::string_view what, int64_t first, Ints... rest) {
  const int64_t operands[] = {first, static_cast<int64_t>(rest)...};
  return checked_detail::Fold(what, "*", operands, TryMul);
}

// The sum of every term. Throws "kv-canary: <what> overflows: a + b [+ c ...]".
template <typename... Ints>
int64_t CheckedAdd(std::string_view what, int64_t first, Ints... rest) {
  const int64_t operands[] = {first, static_cast<int64_t>(rest)...};
  return checked_detail::Fold(what, "+", operands, TryAdd);
}

// Throws "kv-canary: <name> must be in [lo, hi], got value". Written as a negated range test so
// a NaN is refused too.
template <typename T>
void CheckInRange(std::string_view name, T value, T lo, T hi) {
  if (!(value >= lo && value <= hi)) {
    ThrowError("kv-canary: ", name, " must be in [", lo, ", ", hi, "], got ", value);
  }
}

// `value` as the narrower integer type To; a value outside To's range throws CheckInRange's
// message with To's bounds.
template <typename To>
To CheckedNarrow(std::string_view name, int64_t value) {
  static_assert(std::is_integral_v<To> && std::is_signed_v<To> && sizeof(To) <= sizeof(int64_t),
                "CheckedNarrow narrows int64 to a signed integer type");
  CheckInRange<int64_t>(name, value, std::numeric_limits<To>::min(),
                        std::numeric_limits<To>::max());
  return static_cast<To>(value);
}

}  // namespace kvcanary
