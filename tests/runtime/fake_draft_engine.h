// An EAGLE-style draft worker for the runtime's speculative-decoding tests (CPU): a slot pool
// with one layer of K and V bytes, a req_to_token table and a LIFO free list. A prefill step is
// one forward; a draft step is `num_inner_forwards` forwards, forward i writing one draft token
// per request at position kv_len + i after verifying the prefix, the earlier forwards' drafts
// included. After the step the first `accept` drafts of each request stay (the target model's
// verdict) and the slots of the rejected ones go back to the free list.
//
// The draft pool's KV at position p holds the token of position p + token_shift: an EAGLE draft
// model reads the next token beside the hidden state of p, so its pool is shifted by one against
// the target's (InstallArgs::kv_token_id_vs_position_offset tells the runtime).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/capturing_log.h"

namespace kvcanary::runtime::testing {

struct DraftEngineOptions {
  int num_inner_forwards = 3;
  int64_t token_shift = 1;     // the pool holds the token of position p + token_shift at p
  int64_t install_offset = 1;  // InstallArgs::kv_token_id_vs_position_offset
  Config config;
};

// An engine bug in one draft step, at inner forward `inner` and request `row`.
struct DraftFault {
  enum class Kind {
    kNone,
    kPositionPlusOne,     // the forward writes its draft token at position + 1
    kWrongAcceptedToken,  // an accepted draft's KV holds another token than the committed one
  };
  Kind kind = Kind::kNone;
  int inner = 0;
  int64_t row = 0;
};

class FakeDraftEngine {
 public:
  static constexpr int64_t kSlots = 512;
  static constexpr int64_t kMaxReqs = 8;
  static constexpr int64_t kMaxContext = 128;
  static constexpr int64_t kBytesPerToken = 16;
  static constexpr int64_t kMaxTokens = 256;
  static constexpr int64_t kRejectedToken = 500000;  // added to a rejected draft's token
  static constexpr int64_t kWrongToken = 900000;     // added by kWrongAcceptedToken

 private:
  // Declared before the runtime, so they outlive it.
  DraftEngineOptions options_;
  DeviceBuffer k_, v_, table_, columns_;

 public:
  CapturingLog log;
  std::vector<ViolationRow> seen;  // every violation row the runtime showed, in report order
  std::unique_ptr<CanaryManager> canary;

  explicit FakeDraftEngine(DraftEngineOptions options)
      : options_(options),
        k_(Device::CPU(), kSlots * kBytesPerToken),
        v_(Device::CPU(), kSlots * kBytesPerToken),
        table_(Device::CPU(), (kMaxReqs + 1) * kMaxContext * 4),
        columns_(Device::CPU(), options.num_inner_forwards * 6 * 8 * kMaxTokens) {
    std::memset(table_.data(), 0, table_.bytes());
    for (int64_t slot = kSlots - 1; slot >= 1; --slot) free_.push_back(slot);
    InstallArgs args;
    args.req_to_token = table_.View(DType::kInt32, {kMaxReqs + 1, kMaxContext});
    GroupSpec full;
    full.num_slots = kSlots;
    full.k_layer0 = k_.View(DType::kUInt8, {kSlots, kBytesPerToken});
    full.v_layer0 = v_.View(DType::kUInt8, {kSlots, kBytesPerToken});
    full.bytes_per_token = kBytesPerToken;
    args.groups = {full};
    args.pool_slot_count = kSlots;
    args.max_prefill_tokens = kMaxTokens;
    args.speculative_num_draft_tokens = options.num_inner_forwards;
    args.draft_worker = true;
    args.kv_token_id_vs_position_offset = options.install_offset;
    args.num_inner_forwards = options.num_inner_forwards;
    args.log = &log;
    canary = CanaryManager::Install(options.config, args);
    if (!canary) return;
    // After its own warm-up a draft runtime turns on the write's chain-position assert too.
    canary->MarkInitFinished();
    canary->SetViolationListener([this](const ViolationRow& row, int64_t) { seen.push_back(row); });
  }

  // What request `row` holds at `pos`: the committed token stream.
  static int64_t Oracle(int64_t row, int64_t pos) { return 1000 * row + pos; }

  // Adds a request of `prompt_len` tokens, written by the next Prefill; returns its row.
  int64_t AddRequest(int64_t prompt_len) {
    requests_.push_back(Request{++last_row_, 0, prompt_len});
    return last_row_;
  }

  // One forward: every added request's prompt (the draft model's extend).
  void Prefill() {
    Forward forward;
    for (Request& request : requests_) {
      if (request.pending == 0) continue;
      for (int64_t i = 0; i < request.pending; ++i) {
        AddToken(forward, request, request.kv_len, i,
                 Oracle(request.row, i + options_.token_shift));
      }
    }
    RunStep({forward});
    for (Request& request : requests_) {
      request.kv_len += request.pending;
      request.pending = 0;
    }
  }

  // One draft step of num_inner_forwards forwards; each request keeps its first `accept` drafts.
  void DraftStep(int64_t accept, DraftFault fault = {}) {
    std::vector<Forward> forwards(options_.num_inner_forwards);
    for (int i = 0; i < options_.num_inner_forwards; ++i) {
      for (Request& request : requests_) {
        const int64_t pos = request.kv_len + i;
        int64_t token = Oracle(request.row, pos + options_.token_shift);
        if (i >= accept) token += kRejectedToken;
        const bool hit = fault.inner == i && fault.row == request.row;
        if (hit && fault.kind == DraftFault::Kind::kWrongAcceptedToken) token += kWrongToken;
        AddToken(forwards[i], request, request.kv_len, i, token);
        if (hit && fault.kind == DraftFault::Kind::kPositionPlusOne)
          forwards[i].positions.back() += 1;
      }
    }
    RunStep(forwards);
    for (Request& request : requests_) {
      for (int64_t pos = request.kv_len + options_.num_inner_forwards - 1;
           pos >= request.kv_len + accept; --pos) {
        free_.push_back(SlotOf(request.row, pos));
      }
      request.kv_len += accept;
    }
  }

  int64_t SlotOf(int64_t row, int64_t pos) const { return Table()[row * kMaxContext + pos]; }
  int64_t KvLen(int64_t row) const {
    for (const Request& request : requests_) {
      if (request.row == row) return request.kv_len;
    }
    return -1;
  }
  // Per step, what each launch of one tag processes: the verified prefix entries plus the written
  // tokens of every inner forward (the slot_run_counters' increment).
  const std::vector<int64_t>& entries_per_step() const { return entries_per_step_; }

 private:
  struct Request {
    int64_t row = 0;
    int64_t kv_len = 0;   // positions [0, kv_len) hold committed tokens
    int64_t pending = 0;  // prompt tokens not written yet
  };
  // One inner forward as the engine schedules it.
  struct Forward {
    std::vector<int64_t> rows, prefix, extend, ids, positions, slots;
    std::vector<int64_t> all_ids, all_ids_lens;  // the expected-token pool's input
  };

  // Adds the token at position start + offset of `request` to `forward` in a new slot; the
  // request's batch row is the one its first token opened.
  void AddToken(Forward& forward, const Request& request, int64_t start, int64_t offset,
                int64_t token) {
    if (forward.rows.empty() || forward.rows.back() != request.row) {
      forward.rows.push_back(request.row);
      forward.prefix.push_back(start + offset);
      forward.extend.push_back(0);
      // The committed ids: the pool holds the token of p + 1 at p, so one id past kv_len.
      for (int64_t q = 0; q <= start; ++q) forward.all_ids.push_back(Oracle(request.row, q));
      forward.all_ids_lens.push_back(start + 1);
    }
    const int64_t slot = free_.back();
    free_.pop_back();
    Table()[request.row * kMaxContext + start + offset] = static_cast<int32_t>(slot);
    forward.extend.back() += 1;
    forward.ids.push_back(token);
    forward.positions.push_back(start + offset);
    forward.slots.push_back(slot);
  }

  void RunStep(const std::vector<Forward>& forwards) {
    StepInput input;
    int64_t entries = 0;
    for (size_t i = 0; i < forwards.size(); ++i) {
      input.forwards.push_back(FillColumns(static_cast<int>(i), forwards[i]));
      input.host.push_back(HostInput(forwards[i]));
      for (int64_t prefix : forwards[i].prefix) entries += prefix;
      entries += static_cast<int64_t>(forwards[i].ids.size());
    }
    entries_per_step_.push_back(entries);
    canary->BeginStep(input);
    for (size_t i = 0; i < forwards.size(); ++i) {
      canary->PreForward(static_cast<int>(i));
      WriteKv(forwards[i]);  // the draft model's KV write
      canary->PostForward(static_cast<int>(i));
    }
    canary->EndStep();
  }

  // The batch columns of inner forward `inner`: each forward has its own six columns.
  ForwardBatch FillColumns(int inner, const Forward& forward) {
    const std::vector<int64_t>* sources[6] = {&forward.rows, &forward.prefix,    &forward.extend,
                                              &forward.ids,  &forward.positions, &forward.slots};
    ForwardBatch batch;
    TensorView* views[6] = {&batch.req_pool_indices, &batch.prefix_lens, &batch.extend_seq_lens,
                            &batch.input_ids,        &batch.positions,   &batch.out_cache_loc};
    for (int c = 0; c < 6; ++c) {
      const int64_t offset = 8 * kMaxTokens * (6 * inner + c);
      std::memcpy(columns_.data_as<char>() + offset, sources[c]->data(), 8 * sources[c]->size());
      *views[c] = columns_.View(DType::kInt64, {kMaxTokens}, offset);
    }
    batch.batch_size = static_cast<int64_t>(forward.rows.size());
    batch.num_tokens = static_cast<int64_t>(forward.ids.size());
    return batch;
  }

  ForwardHostInput HostInput(const Forward& forward) const {
    ForwardHostInput host;
    host.req_pool_indices = forward.rows;
    host.prefix_lens = forward.prefix;
    host.extend_seq_lens = forward.extend;
    if (options_.config.enable_verify_token_assert) {
      host.req_all_ids_flat = forward.all_ids;
      host.req_all_ids_lens = forward.all_ids_lens;
    }
    return host;
  }

  void WriteKv(const Forward& forward) {
    for (size_t i = 0; i < forward.slots.size(); ++i) {
      const int64_t base = forward.slots[i] * kBytesPerToken;
      for (int64_t b = 0; b < kBytesPerToken; ++b) {
        const uint64_t word = Splitmix64(
            static_cast<uint64_t>(forward.ids[i] * 131 + forward.positions[i] * 7 + b / 8));
        k_.data_as<uint8_t>()[base + b] = static_cast<uint8_t>(word >> (8 * (b % 8)));
        v_.data_as<uint8_t>()[base + b] = static_cast<uint8_t>(word >> (8 * (7 - b % 8)));
      }
    }
  }

  int32_t* Table() const { return table_.data_as<int32_t>(); }

  std::vector<Request> requests_;
  std::vector<int64_t> free_;  // LIFO: a freed slot is the next one handed out
  std::vector<int64_t> entries_per_step_;
  int64_t last_row_ = 0;
};

}  // namespace kvcanary::runtime::testing
