// Fault injection. Everything here runs on the host outside any graph: it
// reads and writes device memory with stream-ordered copies followed by a synchronisation, so a
// corruption is in place before the next enqueued launch reads it.
#include "runtime/perturbation.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/radix_view.h"
#include "runtime/compressed_pool.h"
#include "runtime/runtime_state.h"

namespace kvcanary::runtime {
namespace {

__attribute__((format(printf, 1, 2))) std::string Printf(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

// Reads one int32 or int64 element of a view (on its device) as int64.
int64_t ReadIndex(const TensorView& view, int64_t row, int64_t col, StreamHandle stream) {
  const int64_t item = ItemSize(view.dtype());
  int64_t value = 0;
  if (item == 4) {
    int32_t narrow = 0;
    CopyBytesAsync(&narrow, ElementAddress(view, row, col), 4, view.device(), stream);
    SynchronizeStream(view.device(), stream);
    value = narrow;
  } else {
    CopyBytesAsync(&value, ElementAddress(view, row, col), 8, view.device(), stream);
    SynchronizeStream(view.device(), stream);
  }
  return value;
}

// Elements [0, count) of a 1-D integer view, on the host (a table's rows: ReadTableSlots).
std::vector<int64_t> ReadRow(const TensorView& view, int64_t count, StreamHandle stream) {
  std::vector<int64_t> out(count);
  if (count <= 0) return out;
  const int64_t item = ItemSize(view.dtype());
  const int64_t stride = view.stride(0);
  const char* base = static_cast<const char*>(view.data());
  std::vector<char> bytes(count * item);
  if (stride == 1) {
    CopyBytesAsync(bytes.data(), base, count * item, view.device(), stream);
  } else {
    for (int64_t i = 0; i < count; ++i) {
      CopyBytesAsync(bytes.data() + i * item, base + i * stride * item, item, view.device(),
                     stream);
    }
  }
  SynchronizeStream(view.device(), stream);
  for (int64_t i = 0; i < count; ++i) {
    if (item == 4) {
      int32_t narrow = 0;
      std::memcpy(&narrow, bytes.data() + 4 * i, 4);
      out[i] = narrow;
    } else {
      std::memcpy(&out[i], bytes.data() + 8 * i, 8);
    }
  }
  return out;
}

}  // namespace

std::optional<FlipAddress> LocateFlip(int64_t logical_slot, const TensorView& full_to_swa,
                                      const RealKvSource& source, StreamHandle stream) {
  if (logical_slot < 0) return std::nullopt;
  int64_t slot = logical_slot;
  if (full_to_swa.defined()) {
    if (logical_slot >= full_to_swa.size(0)) return std::nullopt;
    slot = ReadIndex(full_to_swa, logical_slot, 0, stream);
    if (slot < 0) return std::nullopt;
  }
  const int64_t row = slot / source.page_size;
  const int64_t col = (slot % source.page_size) * source.num_bytes_per_token;
  const int64_t row_bytes = source.tensor.size(1) * ItemSize(source.tensor.dtype());
  if (row >= source.tensor.size(0) || col >= row_bytes) return std::nullopt;
  return FlipAddress{slot, row, col};
}

uint64_t PerturbRng::Next() {
  state_ += 0x9E3779B97F4A7C15ull;  // the splitmix64 increment (golden ratio)
  return Splitmix64(state_);
}

double PerturbRng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int64_t PerturbRng::Below(int64_t n) { return static_cast<int64_t>(Next() % uint64_t(n)); }

Perturber::Perturber(const PerturbationHost& host, const PerturbConfig& config)
    : host_(host), config_(config), rng_(config.seed) {}

bool Perturber::ShouldRun(const char* name, double probability, int64_t step, bool has_batch) {
  if (probability <= 0) return false;
  if (step < config_.warmup_steps) {
    if (!warmup_logged_) {
      host_.Log(LogLevel::kInfo,
                Printf("kv_canary perturb: disabled during warmup window (first %lld forward "
                       "steps)",
                       static_cast<long long>(config_.warmup_steps)));
      warmup_logged_ = true;
    }
    return false;
  }
  if (warmup_logged_ && !enabled_logged_) {
    host_.Log(LogLevel::kInfo, Printf("kv_canary perturb: enabled after warmup window at step=%lld",
                                      static_cast<long long>(step)));
    enabled_logged_ = true;
  }
  if (!has_batch) {
    Skip(name, "maybe_inaccurate_forward_batch is unavailable");
    return false;
  }
  return rng_.Uniform() < probability;
}

void Perturber::Skip(const char* name, const std::string& reason) const {
  host_.Log(LogLevel::kInfo,
            Printf("kv_canary perturb %s: skipped because %s", name, reason.c_str()));
}

void Perturber::Emit(const PerturbationEvent& event) const {
  host_.Emit(event);
}

int Perturber::PickGroup(const char* name) {
  const GroupKind target = config_.RequireTargetGroup(name);
  std::vector<int> candidates;
  for (size_t g = 0; g < host_.Groups().size(); ++g) {
    const GroupState& group = host_.Groups()[g];
    if (group.spec.kind == target && !group.sources[0].empty()) {
      candidates.push_back(static_cast<int>(g));
    }
  }
  if (candidates.empty()) {
    Skip(name, std::string("no buffer group of target_group=") + GroupKindName(target) +
                   " has real-KV sources");
    return -1;
  }
  return candidates[rng_.Below(static_cast<int64_t>(candidates.size()))];
}

int64_t Perturber::FoldedBytes(const RealKvSource& source) const {
  const int64_t folded =
      host_.RealData() == RealKvHashMode::kAll ? source.read_bytes : kRealKvBlockBytes;
  return std::max<int64_t>(1, std::min(folded, source.num_bytes_per_token));
}

void Perturber::Flip(const char* name, int group_index, int64_t logical_slot, int64_t req_pool_idx,
                     int64_t position, int64_t step, bool random_byte) {
  const GroupState& group = host_.Groups()[group_index];
  // A random fingerprinted layer (source_idx counts layers: one source may span several).
  const std::vector<TensorView>& layers = group.fingerprinted_layers[0];
  const int64_t source_idx = rng_.Below(static_cast<int64_t>(layers.size()));
  RealKvSource source = group.sources[0].front();  // every layer has this geometry
  source.tensor = layers[source_idx];
  const TensorView lut = SlotTable(group.spec);
  const std::optional<FlipAddress> at = LocateFlip(logical_slot, lut, source, host_.Stream());
  if (!at.has_value()) {
    Skip(name, Printf("slot=%lld has no strip in source_idx=%lld of group=%s",
                      static_cast<long long>(logical_slot), static_cast<long long>(source_idx),
                      GroupKindName(group.spec.kind)));
    return;
  }
  // Drawn only for real_perturb_bytes, so the other kinds' seeded sequences stay as they were.
  const int64_t offset = random_byte ? rng_.Below(FoldedBytes(source)) : 0;
  const int64_t col = at->col + offset;
  char* byte = ElementAddress(source.tensor, at->row, 0) + col;
  const Device device = source.tensor.device();
  uint8_t original = 0;
  CopyBytesAsync(&original, byte, 1, device, host_.Stream());
  SynchronizeStream(device, host_.Stream());
  const uint8_t flipped = static_cast<uint8_t>(original ^ 0xFF);
  CopyBytesAsync(byte, &flipped, 1, device, host_.Stream());
  SynchronizeStream(device, host_.Stream());
  host_.Log(LogLevel::kInfo,
            Printf("kv_canary perturb %s: group=%s source_idx=%lld slot=%lld row=%lld col=%lld "
                   "original_byte=0x%02X new_byte=0x%02X",
                   name, GroupKindName(group.spec.kind), static_cast<long long>(source_idx),
                   static_cast<long long>(at->slot), static_cast<long long>(at->row),
                   static_cast<long long>(col), original, flipped));
  Emit(PerturbationEvent{name, step, at->slot, req_pool_idx, position, original, flipped,
                         source_idx, offset});
}

TokenTable Perturber::TableOf(const ForwardState& forward) const {
  return ForwardTokenTable(host_.InstalledTable(), forward.batch);
}

std::vector<int64_t> Perturber::WrittenSlots(const ForwardState& forward) const {
  const ForwardBatch& batch = forward.batch;
  if (!batch.out_cache_loc.defined()) return {};
  // The non-padded tokens are the ones the host batch extends by; the rest is padding.
  int64_t count = 0;
  for (int64_t extend : forward.host.extend_seq_lens) count += std::max<int64_t>(extend, 0);
  count = std::min({count, batch.num_tokens, batch.out_cache_loc.size(0)});
  std::vector<int64_t> slots = ReadRow(batch.out_cache_loc, count, host_.Stream());
  slots.erase(std::remove(slots.begin(), slots.end(), kTokenToKvSlotPadding), slots.end());
  return slots;
}

std::vector<Perturber::ActiveEntry> Perturber::CollectActive(const ForwardState& forward) const {
  const ForwardHostInput& host = forward.host;
  const TokenTable table = TableOf(forward);
  const std::vector<int64_t> written_list = WrittenSlots(forward);
  const std::unordered_set<int64_t> written(written_list.begin(), written_list.end());
  std::vector<TableRowSpan> spans;
  std::vector<int64_t> seq_lens;
  for (size_t r = 0; r < host.req_pool_indices.size(); ++r) {
    const int64_t rp = host.req_pool_indices[r];
    if (rp == kReqPoolIdxPadding || rp < 0 || rp >= table.rows || r >= host.prefix_lens.size()) {
      continue;
    }
    const int64_t extend = r < host.extend_seq_lens.size() ? host.extend_seq_lens[r] : 0;
    const int64_t seq_len = host.prefix_lens[r] + extend;
    spans.push_back(TableRowSpan{rp, std::clamp<int64_t>(seq_len, 0, table.max_seq_len)});
    seq_lens.push_back(seq_len);
  }
  const std::vector<std::vector<int64_t>> slots = ReadTableSlots(table, spans, host_.Stream());
  std::vector<ActiveEntry> active;
  for (size_t i = 0; i < spans.size(); ++i) {
    for (int64_t pos = 0; pos < spans[i].length; ++pos) {
      const int64_t slot = slots[i][pos];
      if (slot >= 0 && written.count(slot) == 0) {
        active.push_back(ActiveEntry{spans[i].row, pos, slot, seq_lens[i]});
      }
    }
  }
  return active;
}

std::vector<Perturber::ActiveEntry> Perturber::LiveEntries(const ForwardState& forward,
                                                           int group) const {
  const int64_t window = host_.Groups()[group].window;
  std::vector<ActiveEntry> active = CollectActive(forward);
  if (window > 0) {
    // An SWA group holds only the last W positions of each request.
    std::erase_if(active,
                  [window](const ActiveEntry& e) { return e.position < e.seq_len - window; });
  }
  return active;
}

void Perturber::PerturbReqToToken(const ForwardState& forward, int64_t step) {
  const char* name = "req_to_token";
  const std::vector<ActiveEntry> active = CollectActive(forward);
  if (active.empty()) return Skip(name, "the batch has no live req_to_token entry");
  const ActiveEntry& target = active[rng_.Below(static_cast<int64_t>(active.size()))];
  // A block table gets another live block in the target's column: the whole block moves, as a
  // swapped block-table entry would move it (a per-token table is blocks of one).
  const TokenTable table = TableOf(forward);
  const int64_t block = table.block_size;
  std::vector<int64_t> replacements;
  for (const ActiveEntry& entry : active) {
    if (entry.slot >= 1 && entry.slot / block != target.slot / block) {
      replacements.push_back(entry.slot);
    }
  }
  if (replacements.empty()) return Skip(name, "the batch has no other live slot");
  const int64_t cell =
      replacements[rng_.Below(static_cast<int64_t>(replacements.size()))] / block;
  const int64_t new_slot = cell * block + target.position % block;
  const TensorView& tensor = table.tensor();
  const int32_t narrow = static_cast<int32_t>(cell);
  const int64_t item = ItemSize(tensor.dtype());
  CopyBytesAsync(ElementAddress(tensor, target.req_pool_idx, target.position / block),
                 item == 4 ? static_cast<const void*>(&narrow) : &cell, item, tensor.device(),
                 host_.Stream());
  SynchronizeStream(tensor.device(), host_.Stream());
  host_.Log(
      LogLevel::kInfo,
      Printf("kv_canary perturb req_to_token: req_pool_idx=%lld position=%lld "
             "original_slot=%lld new_slot=%lld",
             static_cast<long long>(target.req_pool_idx), static_cast<long long>(target.position),
             static_cast<long long>(target.slot), static_cast<long long>(new_slot)));
  Emit(PerturbationEvent{name, step, new_slot, target.req_pool_idx, target.position, target.slot,
                         new_slot});
}

void Perturber::PerturbRealKvUsed(const ForwardState& forward, int64_t step) {
  const char* name = "real_kv_used";
  const int group = PickGroup(name);
  if (group < 0) return;
  const std::vector<ActiveEntry> active = LiveEntries(forward, group);
  if (active.empty()) return Skip(name, "the batch has no live slot");
  const ActiveEntry& entry = active[rng_.Below(static_cast<int64_t>(active.size()))];
  Flip(name, group, entry.slot, entry.req_pool_idx, entry.position, step);
}

void Perturber::PerturbRealKvUnusedCache(int64_t step) {
  const char* name = "real_kv_unused_cache";
  if (host_.Radix() == nullptr) return Skip(name, "no radix cache is attached");
  const int group = PickGroup(name);
  if (group < 0) return;
  const bool swa = host_.Groups()[group].spec.kind == GroupKind::kSwa;
  const RadixWalk walk = WalkRadix(*host_.Radix(), /*unlocked_only=*/true,
                                   /*swa_resident_only=*/swa, host_.InstalledTable().max_seq_len);
  std::vector<int64_t> candidates;
  for (int64_t i = 0; i < walk.size(); ++i) {
    if (walk.slot_indices[i] >= 1) candidates.push_back(i);
  }
  if (candidates.empty()) return Skip(name, "the radix cache has no unlocked slot");
  const int64_t pick = candidates[rng_.Below(static_cast<int64_t>(candidates.size()))];
  Flip(name, group, walk.slot_indices[pick], -1, walk.positions[pick], step);
}

void Perturber::PerturbRealKvPostForward(const ForwardState& forward, int64_t step) {
  const char* name = "real_kv_post_forward";
  const int group = PickGroup(name);
  if (group < 0) return;
  const std::vector<int64_t> written = WrittenSlots(forward);
  if (written.empty()) return Skip(name, "the forward wrote no slot");
  Flip(name, group, written[rng_.Below(static_cast<int64_t>(written.size()))], -1, -1, step);
}

void Perturber::BeforeForward() {
  const int64_t step = host_.OuterStep();
  const ForwardState& forward = host_.FirstForward();
  if (ShouldRun("req_to_token", config_.req_to_token_prob, step, forward.has_batch)) {
    PerturbReqToToken(forward, step);
  }
  if (ShouldRun("real_kv_used", config_.real_kv_used_prob, step, forward.has_batch)) {
    PerturbRealKvUsed(forward, step);
  }
  const int64_t interval = host_.SweepInterval();
  if (interval > 0 && step % interval == 0 &&
      ShouldRun("real_kv_unused_cache", config_.real_kv_unused_cache_prob, step,
                /*has_batch=*/true)) {
    PerturbRealKvUnusedCache(step);
  }
  if (ShouldRun("real_perturb_bytes", config_.real_perturb_bytes_prob, step, forward.has_batch)) {
    PerturbRealBytes(forward, step);
  }
}

void Perturber::AfterForward() {
  const int64_t step = host_.OuterStep();
  const ForwardState& forward = host_.FirstForward();
  if (ShouldRun("real_kv_post_forward", config_.real_kv_post_forward_prob, step,
                forward.has_batch)) {
    PerturbRealKvPostForward(forward, step);
  }
}

void Perturber::PerturbNextTokens(std::vector<int64_t>& sampled) {
  const int64_t step = sampler_step_++;
  if (!ShouldRun("next_token_swap", config_.next_token_swap_prob, step, /*has_batch=*/true)) {
    return;
  }
  const int64_t n = static_cast<int64_t>(sampled.size());
  if (n < 2) return;
  const int64_t i = rng_.Below(n);
  int64_t j = rng_.Below(n - 1);
  if (j >= i) j += 1;
  PerturbationEvent event{"next_token_swap", step, -1, i, j, sampled[i], sampled[j]};
  std::swap(sampled[i], sampled[j]);
  host_.Log(
      LogLevel::kInfo,
      Printf("kv_canary perturb next_token_swap: swapped i=%lld j=%lld step=%lld",
             static_cast<long long>(i), static_cast<long long>(j), static_cast<long long>(step)));
  Emit(event);
}

}  // namespace kvcanary::runtime
