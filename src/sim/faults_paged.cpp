// The paged layout's fault classes (--block-size > 0): a block table entry pointing at the wrong
// block, a block freed while a request still reads it, a KV byte flipped in a block of any
// fingerprinted layer, and a new token written through a stale slot mapping. The bookkeeping
// (attribution, quarantine) is the other classes', in faults.cpp.
#include <sstream>

#include "sim/faults.h"

namespace kvcanary::sim {
namespace {

void InsertBlockSlots(std::set<int64_t>& slots, int64_t block, int64_t block_size) {
  for (int64_t offset = 0; offset < block_size; ++offset) slots.insert(block * block_size + offset);
}

}  // namespace

void FaultInjector::InjectBlockTableSwap(Engine& engine, Batch& batch) {
  BlockTable& blocks = *engine.block_table();
  const int64_t bs = blocks.block_size();
  // Two whole blocks before the one holding the write seed (position kv_len - 1), so the new
  // token still chains from the right record: only the reads go wrong.
  Request* victim = PickDecodeVictim(batch, 2 * bs + 1);
  if (victim == nullptr) return;
  const int64_t row = victim->row;
  const int64_t seed_index = (victim->kv_len - 1) / bs;
  const int64_t a = Uniform(0, seed_index - 1);
  int64_t b = Uniform(0, seed_index - 2);
  if (b >= a) b += 1;
  const int64_t block_a = blocks.Get(row, a);
  const int64_t block_b = blocks.Get(row, b);
  blocks.Set(row, a, block_b);
  blocks.Set(row, b, block_a);
  std::ostringstream target;
  target << "req " << victim->spec.id << " row " << row << ": block table entries " << a << " and "
         << b << " swapped (blocks " << block_a << ", " << block_b << ")";
  Open& open = Start(FaultKind::kBlockTableSwap, target.str());
  open.victims = {victim->spec.id};
  InsertBlockSlots(open.slots, block_a, bs);
  InsertBlockSlots(open.slots, block_b, bs);
  const int64_t id = victim->spec.id;
  // The records were never wrong: putting the entries back repairs everything.
  open.undo = [id, row, a, b, block_a, block_b](Engine& e) {
    Request* req = e.FindRunning(id);
    if (req == nullptr || req->row != row) return;
    e.block_table()->Set(row, a, block_a);
    e.block_table()->Set(row, b, block_b);
  };
}

void FaultInjector::InjectFreedBlockReuse(Engine& engine, Batch& batch) {
  const BlockTable& blocks = *engine.block_table();
  const int64_t bs = blocks.block_size();
  Request* victim = PickDecodeVictim(batch, bs + 1);
  if (victim == nullptr) return;
  // A whole block of the request's own (not the radix cache's), before the one holding the write
  // seed: the request keeps reading it, and never writes it again.
  const int64_t first_owned = victim->cached_len / bs;
  const int64_t seed_index = (victim->kv_len - 1) / bs;
  if (first_owned >= seed_index) return;
  const int64_t index = Uniform(first_owned, seed_index - 1);
  const int64_t block = blocks.Get(victim->row, index);
  // Freed at the end of the step (AfterStep): LIFO hands it to the next allocation.
  pending_free_unit_ = block;
  std::ostringstream target;
  target << "req " << victim->spec.id << " block " << block << " (positions " << index * bs
         << "-" << (index + 1) * bs - 1 << ") freed while in use";
  Open& open = Start(FaultKind::kFreedBlockReuse, target.str());
  open.victims = {victim->spec.id};
  InsertBlockSlots(open.slots, block, bs);
  open.abort_victims = true;
}

void FaultInjector::InjectRealKvPage(Engine& engine, Batch& batch) {
  const BlockTable& blocks = *engine.block_table();
  Request* victim = PickDecodeVictim(batch, 2);
  if (victim == nullptr) return;
  const int64_t pos = Uniform(0, victim->kv_len - 1);
  const int64_t slot = blocks.SlotAt(victim->row, pos);
  // Any layer the canary fingerprints (layer 0, or every layer with --fingerprint-layers all, the
  // paged preset's setting); a flip beyond them is real_kv_deep_layer's.
  const int layer = static_cast<int>(Uniform(0, engine.FingerprintedLayers() - 1));
  const int kv = static_cast<int>(Uniform(0, 1));
  const int64_t byte = Uniform(0, 15);  // inside the 16 bytes `partial` fingerprints
  engine.pool().FlipByte(layer, kv, slot, byte);
  std::ostringstream target;
  target << "req " << victim->spec.id << " block " << slot / blocks.block_size() << " pos " << pos
         << " slot " << slot << " layer " << layer << (kv == 0 ? " K" : " V") << " byte " << byte;
  Open& open = Start(FaultKind::kRealKvPage, target.str());
  open.victims = {victim->spec.id};
  MarkFlip(engine, open, slot);
}

void FaultInjector::InjectStaleOutCacheLoc(Engine& engine, Batch& batch, ForwardView& view) {
  const int64_t bs = engine.block_table()->block_size();
  size_t index = 0;
  Request* victim = PickDecodeVictim(batch, 1, &index);
  if (victim == nullptr) return;
  int64_t token = 0;
  for (size_t i = 0; i < index; ++i) token += batch.rows[i].extend_len;
  const int64_t slot = view.out_cache_loc[token];
  const int64_t pos = view.positions[token];
  // The slot still holding this token at this position would make the write's loss invisible.
  if (engine.SlotContent(slot) == std::make_pair(victim->tokens[pos], pos)) return;
  // The mapping came from a stale copy of the table: the same offset in a block freed since.
  SlotAllocator& allocator = engine.allocator();
  int64_t stale_block = -1;
  for (int attempt = 0; attempt < 16 && stale_block < 0; ++attempt) {
    const int64_t block = Uniform(1, allocator.num_slots() - 1);
    if (allocator.IsFree(block)) stale_block = block;
  }
  if (stale_block < 0) return;
  const int64_t stale = stale_block * bs + slot % bs;
  view.out_cache_loc[token] = stale;
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << " written to slot " << stale
         << " (freed block " << stale_block << ") instead of slot " << slot;
  Open& open = Start(FaultKind::kStaleOutCacheLoc, target.str());
  open.victims = {victim->spec.id};
  open.slots = {slot, stale};
  open.abort_victims = true;  // its record of `pos` was never written where the table points
}

}  // namespace kvcanary::sim
