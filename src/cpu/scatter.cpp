// CPU reference of the scatter operation.
#include "cpu/backend.h"

namespace kvcanary::cpu {

void Scatter(const ScatterParams& params) {
  if (params.bs == 0 || params.total == 0) return;
  for (int64_t r = 0; r < params.bs; ++r) {
    const int64_t rp = params.req_pool_indices[r * params.req_pool_indices_stride];
    if (rp < 0 || rp >= params.pool_rows) continue;  // D7
    const int64_t start = params.offsets[r * params.offsets_stride];
    const int64_t len = static_cast<int64_t>(
        static_cast<uint64_t>(params.offsets[(r + 1) * params.offsets_stride]) -
        static_cast<uint64_t>(start));
    const int64_t copied = len < params.pool_width ? len : params.pool_width;
    for (int64_t c = 0; c < copied; ++c) {
      const int64_t k = static_cast<int64_t>(static_cast<uint64_t>(start) + c);
      if (k < 0 || k >= params.total) continue;
      params.pool[rp * params.pool_stride0 + c * params.pool_stride1] =
          static_cast<int32_t>(params.flat_in[k * params.flat_stride]);
    }
  }
}

}  // namespace kvcanary::cpu
