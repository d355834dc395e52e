// The pool as the canary sees it beyond per-token K and V: an MLA pool (--pool-layout mla), whose
// K layers stand for the latent buffer and whose V bytes the canary never reads, and a compressed
// pool beside the full pool (--compress-ratio), which the FULL group then describes. Each is a
// description at install; the step protocol does not change.
#include "sim/engine.h"

namespace kvcanary::sim {

void Engine::DescribePoolKind(runtime::GroupSpec& full) {
  if (options_.pool_layout == "mla") {
    full.layout = runtime::PoolLayout::kMla;
    full.v_layer0 = TensorView();
    full.v_layers.clear();
  }
  if (options_.compress_ratio > 1) {
    compressed_ = std::make_unique<CompressedState>(device_, options_.num_slots,
                                                    options_.compress_ratio,
                                                    options_.bytes_per_token, stream_->handle());
    compressed_->Describe(full);
  }
}

void Engine::WriteTokenKv(int64_t slot, int64_t token, int64_t position) {
  int64_t target = slot;
  if (misdirected_.first == slot) {
    // The latent page is written through another page: its own keeps what it held before.
    target = misdirected_.second;
    misdirected_ = {-1, -1};
  }
  pool_->WriteToken(target, token, position);
  if (compressed_) compressed_->Write(slot, token, position);
}

}  // namespace kvcanary::sim
