#include "sim/oracle_model.h"

#include <cstring>

#include "kvcanary/error.h"
#include "kvcanary/hash.h"
#include "sim/kv_bytes.h"
#include "sim/kv_pool.h"

namespace kvcanary::sim {
namespace {

// An odd 64-bit constant (splitmix64's second multiplier): multiplication by it is a bijection
// mod 2^64.
constexpr uint64_t kOracleMultiplier = 0x94D049BB133111EBull;
constexpr uint64_t kLaneSalt = 0x0AC1E0AC1E0AC1E1ull;

inline uint64_t LoadWord(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));  // little-endian hosts only, as the rest of kvcanary
  return w;
}

// Folds one row into the four lanes of its table. `row == nullptr` folds zeros.
inline void FoldRow(uint64_t* lanes, const uint8_t* row, int64_t bytes) {
  uint64_t l0 = lanes[0], l1 = lanes[1], l2 = lanes[2], l3 = lanes[3];
  if (row == nullptr) {
    for (int64_t off = 0; off < bytes; off += 32) {
      l0 *= kOracleMultiplier;
      if (off + 8 < bytes) l1 *= kOracleMultiplier;
      if (off + 16 < bytes) l2 *= kOracleMultiplier;
      if (off + 24 < bytes) l3 *= kOracleMultiplier;
    }
  } else {
    int64_t off = 0;
    for (; off + 32 <= bytes; off += 32) {
      l0 = (l0 ^ LoadWord(row + off)) * kOracleMultiplier;
      l1 = (l1 ^ LoadWord(row + off + 8)) * kOracleMultiplier;
      l2 = (l2 ^ LoadWord(row + off + 16)) * kOracleMultiplier;
      l3 = (l3 ^ LoadWord(row + off + 24)) * kOracleMultiplier;
    }
    // A row of 8 or 16 or 24 bytes past the last full group (bytes is a multiple of 8).
    if (off < bytes) l0 = (l0 ^ LoadWord(row + off)) * kOracleMultiplier;
    if (off + 8 < bytes) l1 = (l1 ^ LoadWord(row + off + 8)) * kOracleMultiplier;
    if (off + 16 < bytes) l2 = (l2 ^ LoadWord(row + off + 16)) * kOracleMultiplier;
  }
  lanes[0] = l0, lanes[1] = l1, lanes[2] = l2, lanes[3] = l3;
}

}  // namespace

OracleModel::OracleModel(int num_layers, int64_t bytes_per_token, int64_t vocab_size)
    : num_layers_(num_layers), bytes_per_token_(bytes_per_token), vocab_size_(vocab_size) {
  if (num_layers < 1) ThrowError("kv-canary sim: num_layers: expected >= 1, got ", num_layers);
  if (bytes_per_token <= 0 || bytes_per_token % 8 != 0) {
    ThrowError("kv-canary sim: bytes_per_token: expected a positive multiple of 8, got ",
               bytes_per_token);
  }
  if (vocab_size < 2) ThrowError("kv-canary sim: vocab_size: expected >= 2, got ", vocab_size);
}

std::vector<uint64_t> OracleModel::InitialLanes() const {
  std::vector<uint64_t> lanes(static_cast<size_t>(num_tables() * kLanes));
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i] = Splitmix64(kLaneSalt + i);
  return lanes;
}

uint64_t OracleModel::Finish(const std::vector<uint64_t>& lanes, int64_t seq_len,
                             int64_t query_token) const {
  uint64_t h = Splitmix64(ToUnsigned(seq_len) ^ kLaneSalt);
  for (uint64_t lane : lanes) h = Splitmix64(h ^ lane);
  return Splitmix64Mix3(h, ToUnsigned(query_token), ToUnsigned(seq_len));
}

uint64_t OracleModel::Hash(const KvReader& read, int64_t seq_len, int64_t query_token) const {
  std::vector<uint64_t> lanes = InitialLanes();
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      uint64_t* table_lanes = lanes.data() + (2 * layer + kv) * kLanes;
      for (int64_t p = 0; p < seq_len; ++p) {
        FoldRow(table_lanes, read(layer, kv, p), bytes_per_token_);
      }
    }
  }
  return Finish(lanes, seq_len, query_token);
}

int64_t OracleModel::NextToken(const KvReader& read, int64_t seq_len, int64_t query_token) const {
  return TokenOf(Hash(read, seq_len, query_token));
}

uint64_t OracleModel::HashFromPool(const KvPool& pool, const int32_t* slot_row, int64_t seq_len,
                                   int64_t query_token) const {
  if (pool.num_layers() != num_layers_ || pool.bytes_per_token() != bytes_per_token_) {
    ThrowError("kv-canary sim: oracle model of ", num_layers_, " layers x ", bytes_per_token_,
               " bytes read a pool of ", pool.num_layers(), " x ", pool.bytes_per_token());
  }
  const int64_t num_slots = pool.num_slots();
  std::vector<uint64_t> lanes = InitialLanes();
  // Table-major: each table's rows are folded in one pass, so the lanes stay in registers; the
  // lanes of different tables are independent, so this equals ExpectedState's position-major
  // order.
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      uint64_t* table_lanes = lanes.data() + (2 * layer + kv) * kLanes;
      const uint8_t* base = pool.HostTable(layer, kv);
      for (int64_t p = 0; p < seq_len; ++p) {
        const int64_t slot = slot_row[p];
        const uint8_t* row =
            slot >= 0 && slot < num_slots ? base + slot * bytes_per_token_ : nullptr;
        FoldRow(table_lanes, row, bytes_per_token_);
      }
    }
  }
  return Finish(lanes, seq_len, query_token);
}

int64_t OracleModel::NextTokenFromPool(const KvPool& pool, const int32_t* slot_row, int64_t seq_len,
                                       int64_t query_token) const {
  return TokenOf(HashFromPool(pool, slot_row, seq_len, query_token));
}

int64_t OracleModel::ExpectedNextToken(const std::vector<int64_t>& tokens,
                                       int64_t query_token) const {
  ExpectedState state = NewExpectedState();
  for (int64_t token : tokens) state.Append(token);
  return state.NextToken(query_token);
}

ExpectedState OracleModel::NewExpectedState() const { return ExpectedState(this); }

ExpectedState::ExpectedState(const OracleModel* model)
    : model_(model),
      lanes_(model->InitialLanes()),
      scratch_(static_cast<size_t>(model->bytes_per_token())) {}

void ExpectedState::Append(int64_t token) {
  const int64_t bytes = model_->bytes_per_token();
  for (int layer = 0; layer < model_->num_layers(); ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      FillKvBytes(token, length_, layer, kv, scratch_.data(), bytes);
      FoldRow(lanes_.data() + (2 * layer + kv) * OracleModel::kLanes, scratch_.data(), bytes);
    }
  }
  ++length_;
}

uint64_t ExpectedState::Hash(int64_t query_token) const {
  return model_->Finish(lanes_, length_, query_token);
}

int64_t ExpectedState::NextToken(int64_t query_token) const {
  return model_->TokenOf(Hash(query_token));
}

}  // namespace kvcanary::sim
