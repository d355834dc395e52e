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
// A paged case works in blocks instead of slots: block k of a request (positions [kB, kB + B))
// comes from a class of random blocks, so each block holds B consecutive slots and a slot still
// only ever holds one position. B = 1 (a per-token case) is the slot layout above.
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
  // Tokens per block: the case's block size, 1 for a per-token case.
  int64_t block_size() const { return block_size_; }
  int64_t prefix_class_size() const { return prefix_class_size_; }
  int64_t extend_class_size() const { return extend_class_size_; }
  int64_t ClassSize(int64_t position) const {
    return position < shape_.prefix ? prefix_class_size_ : extend_class_size_;
  }

  // The req_to_token row of request j: distinct per request, never the padding row 0.
  int64_t Row(int64_t request) const { return rows_[request]; }
  // Member `index` of position c's class. REQUIRES: index < ClassSize(position).
  int64_t ClassSlot(int64_t position, int64_t index) const {
    return ClassBlock(position / block_size_, index) * block_size_ + position % block_size_;
  }
  int64_t Slot(int64_t request, int64_t position) const {
    return ClassSlot(position, request % ClassSize(position));
  }

 private:
  // Member `index` of block k's class (a slot when block_size is 1).
  int64_t ClassBlock(int64_t block, int64_t index) const;

  BenchCase shape_;
  int64_t block_size_ = 1;
  int64_t prefix_class_size_ = 0;
  int64_t extend_class_size_ = 0;
  // A random permutation of the blocks [1, num_slots / block_size); classes are runs of it.
  std::vector<int32_t> blocks_;
  std::vector<int64_t> rows_;
};

// The token every request holds at `position`: random-looking, in [1, 151936) (a real vocab).
int64_t TokenAt(int64_t position);

// Stores each request's slots in its req_to_token row, columns [0, min(positions, cols)), and for
// a paged case the blocks holding them in its block-table row. A position past the table
// (long-32 writes position 32768 of a 32768-wide table) exists only in the layout: the plan never
// reads it, and the write op gets it through out_cache_loc.
void StoreRequestRows(const Pool& pool, const CaseLayout& layout);

}  // namespace kvcanary::bench
