// The engine's paged layout (--block-size > 0): the block table is the engine's truth, and
// req_to_token follows it.
#include "sim/engine.h"

namespace kvcanary::sim {

void Engine::DeriveReqToToken(const Batch& batch) {
  // The block table may have been edited since the scheduler entered the slots (a fault, or its
  // repair): every position the forward reads is looked up through it again.
  for (const BatchRow& row : batch.rows) {
    int32_t* slots = table_->MutableHostRow(row.row);
    for (int64_t pos = 0; pos < row.prefix_len + row.extend_len; ++pos) {
      slots[pos] = static_cast<int32_t>(blocks_->SlotAt(row.row, pos));
    }
  }
}

}  // namespace kvcanary::sim
