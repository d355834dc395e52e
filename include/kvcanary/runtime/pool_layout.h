// What one slot of a buffer group holds, as the engine describes its KV pool at install. The
// layout decides which canary halves the runtime allocates and drives and which bytes a real-KV
// fingerprint folds; it is a description, not a code path per model (docs/integration.md).
#pragma once

namespace kvcanary::runtime {

enum class PoolLayout : int {
  // K and V per layer: K and V canary halves (an absent V is a K-only pool with the K half alone).
  kMha = 0,
  // DeepSeek-style multi-head latent attention: one latent buffer per layer, given as the K
  // layers. One canary half (HEAD_K / TAIL_K); the V tags stay idle.
  kMla = 1,
  // MLA plus the sparse-attention indexer's key buffer (GroupSpec::indexer_layers): one canary
  // half whose fingerprint folds the latent bytes, then the indexer's.
  kNsa = 2,
};

// "mha", "mla", "nsa"; "unknown" outside the enum.
const char* PoolLayoutName(PoolLayout layout);

}  // namespace kvcanary::runtime
