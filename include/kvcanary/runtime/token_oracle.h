// The token oracle: tokens as a pure function of (request, position), so a
// mismatch between what the scheduler feeds back and what was sampled is detectable without any
// model. Used with enable_write_input_assert / enable_token_oracle.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvcanary::runtime {

// The request-id hash: BLAKE2b with an 8-byte digest size (not a prefix of the 64-byte digest)
// over the UTF-8 bytes of `request_id`, read little-endian as a signed int64.
int64_t RequestIdHash(std::string_view request_id);

// The oracle's group id of a request: the PD bootstrap room when present and >= 0 (prefill and
// decode then agree without sharing request ids), else RequestIdHash(request_id).
int64_t OracleGroupId(std::optional<int64_t> bootstrap_room, std::string_view request_id);

// token(gid, pos) = splitmix64(u64(gid) XOR u64(pos)) mod vocab_size, unsigned modulo, as int32.
// Stateless and thread-safe; the same formula is computable on the device.
class HashOracle {
 public:
  // REQUIRES: 0 < vocab_size <= 2^31 (tokens are int32); else throws kvcanary::Error.
  explicit HashOracle(int64_t vocab_size);

  int32_t Token(int64_t gid, int64_t position) const;
  int64_t vocab_size() const { return vocab_size_; }

 private:
  int64_t vocab_size_;
};

}  // namespace kvcanary::runtime
