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
    : shape_(shape) {
  const int64_t usable = suite.num_slots - 1;  // slot 0 is the padding slot
  const int64_t prefix = shape.prefix;
  const int64_t extend = shape.extend;
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

  slots_.resize(usable);
  std::iota(slots_.begin(), slots_.end(), 1);
  Shuffle(slots_, rng);
  std::vector<int64_t> rows(suite.req_to_token_rows - 1);
  std::iota(rows.begin(), rows.end(), 1);
  Shuffle(rows, rng);
  rows_.assign(rows.begin(), rows.begin() + num_requests);
}

int64_t CaseLayout::ClassSlot(int64_t position, int64_t index) const {
  const int64_t prefix = shape_.prefix;
  const int64_t start =
      position < prefix ? position * prefix_class_size_
                        : prefix * prefix_class_size_ + (position - prefix) * extend_class_size_;
  return slots_[start + index];
}

void StoreRequestRows(const Pool& pool, const CaseLayout& layout) {
  const int64_t cols = pool.suite().req_to_token_cols;
  const int64_t stored = std::min(layout.num_positions(), cols);
  ParallelChunks(layout.num_requests(), [&](int, int64_t begin, int64_t end) {
    std::vector<int32_t> row(stored);
    for (int64_t j = begin; j < end; ++j) {
      for (int64_t c = 0; c < stored; ++c) row[c] = static_cast<int32_t>(layout.Slot(j, c));
      pool.req_to_token().Upload(row, layout.Row(j) * cols);
    }
  });
}

}  // namespace kvcanary::bench
