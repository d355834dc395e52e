// Where one case's tokens live: a canary slot for every (request, position), and the
// req_to_token rows that name them.
//
// Every request of the bench carries the same token sequence, TokenAt(position), so a valid record
// depends only on its position and its own slot's KV bytes: (TokenAt(p), p, chain hash of the
// positions before p, fingerprint). Requests may then share a slot at one position, as
// radix-shared prefixes do in an engine, and some must: decode-1024 verifies 1024 x 4096
// positions, twice the standard pool. Position c owns a class of random slots and request j keeps
// position c in class_c[j mod size_c]. A slot belongs to one class, so it only ever holds one
// position, and every chain a verify follows is valid once ValidRecordWriter has run.
//
// Class sizes: every request gets its own slots when they all fit the pool. Otherwise each extend
// position gets at least `batch` slots (a launch never writes a slot twice)
// and the prefix positions share the rest, so requests j and j + prefix_class_size() share their
// whole prefix.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/cases.h"
#include "bench/parallel.h"

namespace kvcanary::bench {

class Pool;

class CaseLayout {
 public:
  // Throws std::invalid_argument when num_requests exceeds the non-padding req_to_token rows or
  // the case cannot fit the pool.
  CaseLayout(const Suite& suite, const BenchCase& shape, int64_t num_requests, Rng& rng);

  const BenchCase& shape() const { return shape_; }
  int64_t num_requests() const { return static_cast<int64_t>(rows_.size()); }
  int64_t num_positions() const { return shape_.prefix + shape_.extend; }
  int64_t prefix_class_size() const { return prefix_class_size_; }
  int64_t extend_class_size() const { return extend_class_size_; }
  int64_t ClassSize(int64_t position) const {
    return position < shape_.prefix ? prefix_class_size_ : extend_class_size_;
  }

  // The req_to_token row of request j: distinct per request, never the padding row 0.
  int64_t Row(int64_t request) const { return rows_[request]; }
  // Member `index` of position c's class. REQUIRES: index < ClassSize(position).
  int64_t ClassSlot(int64_t position, int64_t index) const;
  int64_t Slot(int64_t request, int64_t position) const {
    return ClassSlot(position, request % ClassSize(position));
  }

 private:
  BenchCase shape_;
  int64_t prefix_class_size_ = 0;
  int64_t extend_class_size_ = 0;
  std::vector<int32_t> slots_;  // a random permutation of [1, num_slots); classes are runs of it
  std::vector<int64_t> rows_;
};

// The token every request holds at `position`: random-looking, in [1, 151936) (a real vocab).
int64_t TokenAt(int64_t position);

// Stores each request's slots in its req_to_token row, columns [0, min(positions, cols)). A
// position past the table (long-32 writes position 32768 of a 32768-wide table) exists only in
// the layout: the plan never reads it, and the write op gets it through out_cache_loc.
void StoreRequestRows(const Pool& pool, const CaseLayout& layout);

}  // namespace kvcanary::bench
