// Slot classes per position and the req_to_token rows of one case.
#include "bench/layout.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "bench/pool.h"
#include "kvcanary/hash.h"

namespace kvcanary::bench {
namespace {

constexpr int64_t kVocabSize = 151936;

[[noreturn]] void ThrowDoesNotFit(const BenchCase& shape, const Suite& suite,
                                  const std::string& why) {
  throw std::invalid_argument("bench case " + shape.name + " does not fit suite " + suite.name +
                              ": " + why);
}

}  // namespace

int64_t TokenAt(int64_t position) {
  return 1 + static_cast<int64_t>(Splitmix64(static_cast<uint64_t>(position) + 0x5EED) %
                                  (kVocabSize - 1));
}

CaseLayout::CaseLayout(const Suite& suite, const BenchCase& shape, int64_t num_requests, Rng& rng)
    : shape_(shape), block_size_(std::max<int64_t>(shape.block_size, 1)) {
  if (shape.block_size != 0 && shape.block_size != kPagedBlockSize) {
    ThrowDoesNotFit(
        shape, suite,
        "the pool's block table has blocks of " + std::to_string(kPagedBlockSize) + " tokens");
  }
  if (shape.prefix % block_size_ != 0) ThrowDoesNotFit(shape, suite, "prefix not in whole blocks");
  // In blocks (slots when block_size_ is 1); block 0 holds the padding slot.
  const int64_t usable = suite.num_slots / block_size_ - 1;
  const int64_t prefix = shape.prefix / block_size_;
  const int64_t extend = (shape.extend + block_size_ - 1) / block_size_;
  if (num_requests < shape.batch || num_requests > suite.req_to_token_rows - 1) {
    ThrowDoesNotFit(shape, suite, std::to_string(num_requests) + " requests");
  }
  if (num_requests * (prefix + extend) <= usable) {
    prefix_class_size_ = extend_class_size_ = num_requests;
  } else if (prefix == 0) {
    extend_class_size_ = usable / std::max<int64_t>(extend, 1);
  } else {
    // Half the pool for the new tokens at most: prefix reads are what verify streams.
    extend_class_size_ =
        std::min(num_requests, std::max(shape.batch, usable / (2 * std::max<int64_t>(extend, 1))));
    prefix_class_size_ =
        std::min(extend_class_size_, (usable - extend * extend_class_size_) / prefix);
  }
  if (extend > 0 && extend_class_size_ < shape.batch) {
    ThrowDoesNotFit(shape, suite, "fewer slots per new position than requests per batch");
  }
  if (prefix > 0 && prefix_class_size_ < 1) ThrowDoesNotFit(shape, suite, "prefix too long");

  blocks_.resize(usable);
  std::iota(blocks_.begin(), blocks_.end(), 1);
  Shuffle(blocks_, rng);
  std::vector<int64_t> rows(suite.req_to_token_rows - 1);
  std::iota(rows.begin(), rows.end(), 1);
  Shuffle(rows, rng);
  rows_.assign(rows.begin(), rows.begin() + num_requests);
}

int64_t CaseLayout::ClassBlock(int64_t block, int64_t index) const {
  const int64_t prefix = shape_.prefix / block_size_;
  const int64_t start = block < prefix
                            ? block * prefix_class_size_
                            : prefix * prefix_class_size_ + (block - prefix) * extend_class_size_;
  return blocks_[start + index];
}

void StoreRequestRows(const Pool& pool, const CaseLayout& layout) {
  const int64_t cols = pool.suite().req_to_token_cols;
  const int64_t stored = std::min(layout.num_positions(), cols);
  const int64_t block = layout.block_size();
  const int64_t blocks = block > 1 ? (stored + block - 1) / block : 0;
  ParallelChunks(layout.num_requests(), [&](int, int64_t begin, int64_t end) {
    std::vector<int32_t> row(stored), block_row(blocks);
    for (int64_t j = begin; j < end; ++j) {
      for (int64_t c = 0; c < stored; ++c) row[c] = static_cast<int32_t>(layout.Slot(j, c));
      pool.req_to_token().Upload(row, layout.Row(j) * cols);
      if (blocks == 0) continue;
      for (int64_t k = 0; k < blocks; ++k) block_row[k] = row[k * block] / block;
      pool.block_table().Upload(block_row, layout.Row(j) * pool.block_table_cols());
    }
  });
}

}  // namespace kvcanary::bench
