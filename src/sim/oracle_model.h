// The simulator's model: a stand-in for attention whose next token depends on every KV byte it
// reads. For each layer and half (K, V), "attention" folds the rows of positions 0..seq_len-1, in
// order, into a hash; the hashes of all layers and the query token give the next token. Run on
// the pool through req_to_token it is the engine's forward (NextToken); run on FillKvBytes of the
// true sequence it is the ground truth (ExpectedNextToken). A wrong slot mapping or a changed
// byte that attention reads changes the hash, and so (but for a 1 / (vocab_size - 1) collision)
// the token: the report's "outputs corrupted" count rests on this.
//
// The fold, per (layer, kv) table and position p, for the row's 8-byte little-endian words w_j:
//   lane[j % 4] = (lane[j % 4] ^ w_j) * kOracleMultiplier
// Each step is a bijection of the lane for a fixed word and of the word for a fixed lane, so one
// changed word always changes the final lanes; the order of positions matters. Four lanes let the
// multiplies of one row run in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace kvcanary::sim {

class KvPool;
class ExpectedState;

class OracleModel {
 public:
  // Returns the row (bytes_per_token bytes) attention reads for `position` of one (layer, kv), or
  // nullptr for "nothing there" (folded as a row of zeros).
  using KvReader = std::function<const uint8_t*(int layer, int kv, int64_t position)>;

  // REQUIRES: num_layers >= 1, bytes_per_token a positive multiple of 8, vocab_size >= 2.
  // Throws kvcanary::Error otherwise.
  OracleModel(int num_layers, int64_t bytes_per_token, int64_t vocab_size);

  int num_layers() const { return num_layers_; }
  int64_t bytes_per_token() const { return bytes_per_token_; }
  int64_t vocab_size() const { return vocab_size_; }

  // The forward: attention over positions [0, seq_len) as `read` serves them.
  uint64_t Hash(const KvReader& read, int64_t seq_len, int64_t query_token) const;
  int64_t NextToken(const KvReader& read, int64_t seq_len, int64_t query_token) const;

  // The same, reading the pool's host rows through one req_to_token row: position p reads slot
  // slot_row[p] (a slot outside the pool reads as zeros, never out of bounds). The fast path the
  // engine uses every step. REQUIRES: the pool's host copy is current (KvPool::FetchToHost on
  // CUDA) and its geometry matches the model's.
  uint64_t HashFromPool(const KvPool& pool, const int32_t* slot_row, int64_t seq_len,
                        int64_t query_token) const;
  int64_t NextTokenFromPool(const KvPool& pool, const int32_t* slot_row, int64_t seq_len,
                            int64_t query_token) const;

  // Ground truth: the same model on FillKvBytes of `tokens` (position i holds tokens[i]), with
  // seq_len = tokens.size(). Equals NextToken when the cache holds exactly those bytes.
  int64_t ExpectedNextToken(const std::vector<int64_t>& tokens, int64_t query_token) const;

  // An empty incremental ground-truth state (see ExpectedState).
  ExpectedState NewExpectedState() const;

  // hash -> token in [1, vocab_size): 0 is never produced (the padding token).
  int64_t TokenOf(uint64_t hash) const {
    return static_cast<int64_t>(hash % static_cast<uint64_t>(vocab_size_ - 1)) + 1;
  }

 private:
  friend class ExpectedState;
  static constexpr int kLanes = 4;
  int num_tables() const { return 2 * num_layers_; }
  // Initial lanes of every table, [table * kLanes + lane].
  std::vector<uint64_t> InitialLanes() const;
  uint64_t Finish(const std::vector<uint64_t>& lanes, int64_t seq_len, int64_t query_token) const;

  int num_layers_;
  int64_t bytes_per_token_;
  int64_t vocab_size_;
};

// The ground truth of one request, folded as its tokens are appended: after Append of tokens
// t_0..t_{n-1}, NextToken(q) == model.ExpectedNextToken({t_0..t_{n-1}}, q) at O(1) per call
// instead of O(n). Copyable (a follow-up may start from a copy). Keeps a pointer to the model,
// which must outlive it.
class ExpectedState {
 public:
  // Folds the KV of `token` at position length().
  void Append(int64_t token);
  int64_t length() const { return length_; }
  uint64_t Hash(int64_t query_token) const;
  int64_t NextToken(int64_t query_token) const;

 private:
  friend class OracleModel;
  explicit ExpectedState(const OracleModel* model);

  const OracleModel* model_;
  std::vector<uint64_t> lanes_;
  std::vector<uint8_t> scratch_;  // one row, reused by Append
  int64_t length_ = 0;
};

}  // namespace kvcanary::sim
