// Two's-complement index arithmetic that wraps instead of overflowing: only
// invalid inputs reach the wrap, and wrapping keeps every such input defined.
#pragma once

#include <cstdint>

#include "kvcanary/hash.h"

namespace kvcanary {

KVC_HOST_DEVICE int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
KVC_HOST_DEVICE int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
KVC_HOST_DEVICE int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
// i clamped to [0, len - 1]. REQUIRES: len > 0.
KVC_HOST_DEVICE int64_t ClampIndex(int64_t i, int64_t len) {
  return i < 0 ? 0 : (i >= len ? len - 1 : i);
}
// x clamped to [0, hi].
KVC_HOST_DEVICE int64_t ClampCount(int64_t x, int64_t hi) { return x < 0 ? 0 : (x > hi ? hi : x); }

}  // namespace kvcanary
