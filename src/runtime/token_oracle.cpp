#include "kvcanary/runtime/token_oracle.h"

#include "kvcanary/error.h"
#include "kvcanary/hash.h"
#include "runtime/blake2b.h"

namespace kvcanary::runtime {
namespace {

// The largest vocabulary whose every token id fits int32.
constexpr int64_t kMaxVocabSize = int64_t{1} << 31;

}  // namespace

int64_t RequestIdHash(std::string_view request_id) {
  const std::vector<uint8_t> digest = Blake2b(request_id.data(), request_id.size(), 8);
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | digest[i];
  return ToSigned(value);
}

int64_t OracleGroupId(std::optional<int64_t> bootstrap_room, std::string_view request_id) {
  if (bootstrap_room.has_value() && *bootstrap_room >= 0) return *bootstrap_room;
  return RequestIdHash(request_id);
}

HashOracle::HashOracle(int64_t vocab_size) : vocab_size_(vocab_size) {
  if (vocab_size <= 0 || vocab_size > kMaxVocabSize) {
    ThrowError("kv-canary: HashOracle vocab_size must be in [1, ", kMaxVocabSize, "], got ",
               vocab_size);
  }
}

int32_t HashOracle::Token(int64_t gid, int64_t position) const {
  const uint64_t mixed = Splitmix64(ToUnsigned(gid) ^ ToUnsigned(position));
  return static_cast<int32_t>(mixed % static_cast<uint64_t>(vocab_size_));
}

}  // namespace kvcanary::runtime
