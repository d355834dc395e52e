// The scatter operation: fills the source-of-truth token pool that verify's
// optional token check reads.
//
//   for r in [0, bs): rp = req_pool_indices[r]; skip rows outside [0, pool_rows)
//     for c in [0, min(offsets[r+1] - offsets[r], pool_width)):
//       k = offsets[r] + c; if 0 <= k < total: pool_out[rp, c] = int32(low 32 bits of flat_in[k])
// Columns past the copied length keep their old contents. Strides of every tensor are honoured.
// Throws kvcanary::Error on invalid arguments before anything is written (S2 with the kType
// category). CUDA: enqueued on `stream`, no synchronisation, graph-capturable.
#pragma once

#include "kvcanary/tensor.h"

namespace kvcanary {

struct ScatterArgs {
  TensorView flat_in;           // [total] int64 token ids of all rows, concatenated
  TensorView offsets;           // [bs+1] int64 row r owns flat_in[offsets[r], offsets[r+1])
  TensorView req_pool_indices;  // [bs] int64 pool row per batch row
  TensorView pool_out;          // [pool_rows, pool_width] int32
};

void Scatter(const ScatterArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
