// BLAKE2b (RFC 7693), unkeyed, for the token oracle's request-id hash.
// The digest length is part of the parameter block, so an 8-byte digest is not a prefix of the
// 64-byte one; callers ask for the length they need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvcanary::runtime {

inline constexpr size_t kBlake2bMaxDigestBytes = 64;

// The unkeyed BLAKE2b digest of `size` bytes at `data`, `digest_bytes` long.
// REQUIRES: 1 <= digest_bytes <= kBlake2bMaxDigestBytes (else throws kvcanary::Error).
std::vector<uint8_t> Blake2b(const void* data, size_t size, size_t digest_bytes);

}  // namespace kvcanary::runtime
