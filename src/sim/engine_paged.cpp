// The engine's paged layout (--block-size > 0): the block table is the engine's truth. The canary
// reads it directly (InstallArgs::block_table, ForwardHostInput::block_ids); req_to_token is kept
// as the host view attention reads, rewritten from the block table before each forward.
#include <algorithm>

#include "kvcanary/format.h"
#include "sim/engine.h"

namespace kvcanary::sim {

bool Engine::FingerprintsAllLayers() const { return options_.fingerprint_layers == "all"; }

int Engine::FingerprintedLayers() const {
  return FingerprintsAllLayers() ? pool_->num_layers() : Layer0SettingLayers();
}

int Engine::Layer0SettingLayers() const {
  if (!blocks_) return 1;
  return std::min(pool_->num_layers(), kMaxRealKvSources);
}

void Engine::DescribePerTokenPool(runtime::GroupSpec& full) const {
  if (!FingerprintsAllLayers()) {  // layer 0, as SGLang fingerprints it
    full.k_layer0 = pool_->Layer(0, 0);
    full.v_layer0 = pool_->Layer(0, 1);
    return;
  }
  for (int layer = 0; layer < pool_->num_layers(); ++layer) {
    full.k_layers.push_back(pool_->Layer(layer, 0));
    full.v_layers.push_back(pool_->Layer(layer, 1));
  }
}

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

void Engine::DescribePagedPool(runtime::GroupSpec& full) const {
  // A block per row, as a paged engine's per-layer caches hold them: the pool's
  // [num_slots, bytes_per_token] tensors read as [num_blocks, block_size * bytes_per_token].
  const int64_t bs = blocks_->block_size();
  full.page_size = bs;
  for (int layer = 0; layer < FingerprintedLayers(); ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      const TensorView rows = pool_->Layer(layer, kv);
      (kv == 0 ? full.k_layers : full.v_layers)
          .push_back(TensorView(rows.data(), DType::kUInt8, device_,
                                {options_.num_slots / bs, bs * options_.bytes_per_token}));
    }
  }
}

void Engine::DescribeBlocks(const Batch& batch, runtime::ForwardBatch& forward,
                            runtime::ForwardHostInput& host) const {
  forward.block_table = blocks_->View();
  for (const BatchRow& row : batch.rows) {
    const int64_t used = BlocksSpanning(row.prefix_len + row.extend_len, blocks_->block_size());
    for (int64_t index = 0; index < used; ++index) {
      host.block_ids.push_back(blocks_->Get(row.row, index));
    }
  }
}

}  // namespace kvcanary::sim
