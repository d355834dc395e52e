// The host tensors of one forward step (plan, verify and write inputs, the plan buffers' stale
// contents, the canary state earlier steps left, real-KV sources), and the seeded generator the
// GPU tests draw random values from. random_inputs.h fills a StepInputs at random; the graph test
// fills its own; backend_pair.h mirrors one onto either backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {

// A seeded generator: a seed reproduces a case (for one standard library).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [lo, hi].
  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  bool OneIn(int64_t n) { return Int(0, n - 1) == 0; }
  uint64_t Bits() { return engine_(); }
  template <typename T>
  T Pick(const std::vector<T>& values) {
    return values[Int(0, static_cast<int64_t>(values.size()) - 1)];
  }
  template <typename It>
  void Shuffle(It first, It last) {
    std::shuffle(first, last, engine_);
  }
  template <typename T>
  void Fill(std::vector<T, AlignedAllocator<T>>& values) {
    auto* bytes = reinterpret_cast<uint8_t*>(values.data());
    const size_t n = values.size() * sizeof(T);
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t word = Bits();
      std::memcpy(bytes + i, &word, std::min<size_t>(8, n - i));
    }
  }

 private:
  std::mt19937_64 engine_;
};

// One real-KV source: its bytes and geometry.
struct KvSourceInput {
  HostTensor<uint8_t> bytes;  // [rows, page_size * num_bytes_per_token + row padding]
  int64_t page_size = 1;
  int64_t num_bytes_per_token = 16;
  int64_t read_bytes = 16;
};

// The base addresses of `views`, as the table of a source spanning them as layers lists them.
inline HostTensor<int64_t> LayerAddresses(const std::vector<TensorView>& views) {
  HostTensor<int64_t> addresses({static_cast<int64_t>(views.size())});
  for (size_t i = 0; i < views.size(); ++i) {
    addresses[static_cast<int64_t>(i)] =
        static_cast<int64_t>(reinterpret_cast<uintptr_t>(views[i].data()));
  }
  return addresses;
}

// `context` with the sources `views` (the bytes of `geometry`, on the context's device) and mode;
// with `layer_addresses` (of `views`), one source whose layers they are.
inline LaunchContext WithSources(LaunchContext context, const std::vector<TensorView>& views,
                                 const std::vector<KvSourceInput>& geometry, RealKvHashMode mode,
                                 const TensorView& layer_addresses = TensorView()) {
  context.real_kv_hash_mode = static_cast<int32_t>(mode);
  if (layer_addresses.defined()) {
    context.real_kv_sources[0] = MakeRealKvSource(
        views[0], geometry[0].page_size, geometry[0].num_bytes_per_token, geometry[0].read_bytes);
    context.real_kv_sources[0].layer_addresses = layer_addresses;
    context.num_real_kv_sources = 1;
    return context;
  }
  for (size_t i = 0; i < views.size(); ++i) {
    context.real_kv_sources[i] = MakeRealKvSource(
        views[i], geometry[i].page_size, geometry[i].num_bytes_per_token, geometry[i].read_bytes);
  }
  context.num_real_kv_sources = static_cast<int>(views.size());
  return context;
}

// One half of a K/V pair: its canary buffer, ring and counters, its sources and its launch tag.
struct HalfInputs {
  CanaryState state;
  std::vector<KvSourceInput> sources;
  int64_t tag = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);
  bool layered = false;  // the sources are the layers of one source (one geometry)
};

// The host tensors of one forward step.
struct StepInputs {
  StepInputs(HalfInputs primary_half, PlanBuffers initial_plan)
      : primary(std::move(primary_half)), plan(std::move(initial_plan)) {}

  HalfInputs primary;
  std::optional<HalfInputs> paired;  // records its rows in the primary's ring (one runtime)
  RealKvHashMode mode = RealKvHashMode::kNone;
  PlanBuffers plan;  // stale contents, as a reused allocation holds
  // Plan inputs.
  HostTensor<int64_t> req_pool_indices, prefix_lens, extend_seq_lens;
  HostTensor<int32_t> req_to_token;
  int64_t req_to_token_width = 0;  // > 0: the plan sees the first columns only (a strided view)
  // A paged block table that describes req_to_token (block_size > 0): the plan reads it instead.
  int64_t block_size = 0;
  std::optional<HostTensor<int32_t>> block_table32;
  std::optional<HostTensor<int64_t>> block_table64;
  int64_t window = 0;
  std::optional<HostTensor<int64_t>> lut;
  // Sampled verify: K, and the phases (one, or one per table row) when K > 1.
  int64_t verify_sample = 1;
  std::optional<HostTensor<int64_t>> verify_phase;
  std::optional<HostTensor<int32_t>> pool;
  std::optional<HostTensor<int64_t>> valid_lens;
  int64_t pool_offset = 0;
  std::optional<HostTensor<int64_t>> scratch;
  bool check_token = false;
  // Write inputs. out_cache_loc holds full-pool slots: with a LUT the step translates them first,
  // as the runtime does before an SWA write.
  HostTensor<int64_t> input_ids, positions, out_cache_loc;
  std::optional<HostTensor<int64_t>> expected_tokens, expected_positions;
};

}  // namespace kvcanary::testing
