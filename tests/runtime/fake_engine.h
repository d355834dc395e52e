// A minimal engine for the runtime's integration tests: a slot pool with one layer of real K and
// V bytes, a req_to_token table, requests that prefill then decode, and the four-phase canary
// protocol around each forward. A test corrupts its state directly.
//
// On the CPU every buffer is the one the runtime reads. On a CUDA device the engine keeps a pinned
// host mirror of the pool, the table and the batch columns: the host computes on the mirror and
// copies what it changed to the device buffers on its own stream (CopyBytesAsync on an
// OwnedStream), the way an engine's scheduler fills its static buffers. The host mirrors are the
// engine's view; a runtime perturbation that edits device memory is not copied back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/capturing_log.h"
#include "runtime/fake_swa_pool.h"
#include "runtime/mirrored_buffer.h"

namespace kvcanary::runtime::testing {

struct FakeEngineOptions {
  // The pool, the table and the batch: their sizes and where they live.
  int64_t num_slots = 512;
  int64_t max_reqs = 8;
  int64_t max_context = 128;
  int64_t bytes_per_token = 32;
  // > 0: each request's slots come in blocks of this many (block b holds slots [b * size,
  // (b + 1) * size)); with `block_table` the runtime reads a paged block table instead of
  // req_to_token. max_context must be a multiple of it.
  int64_t block_size = 0;
  bool block_table = false;
  // > 0: the pool has this many layers, given to the runtime as k_layers / v_layers.
  int64_t layers = 0;
  // > 0: a hybrid pool: an SWA group of `swa_slots` slots (fake_swa_pool.h) keeps the last
  // `swa_window` positions of each request, freed as they leave the window.
  int64_t swa_window = 0;
  int64_t swa_slots = 64;
  Device device = Device::CPU();
  // The runtime installed over them.
  Config config;
  std::optional<Capacities> capacities;
  PerturbConfig perturb;
  bool graph_capture = false;  // InstallArgs::graph_capture (CUDA only)
  int64_t cuda_graph_max_bs = 0;
  ViolationSignalReducer* signal_reducer = nullptr;  // InstallArgs::signal_reducer
  std::function<void(GroupSpec&)> edit_full_group;   // before install (fake_latent_pool.h)
};

// One step as the engine scheduled it: the canary's step input and the tokens it writes.
struct PreparedStep {
  StepInput input;
  std::vector<int64_t> slots;      // out_cache_loc of the live tokens
  std::vector<int64_t> ids;
  std::vector<int64_t> positions;
};

class FakeEngine {
 public:
  explicit FakeEngine(FakeEngineOptions options)
      : options_(options),
        stream_(options.device),
        k_(options.device, LayerCount(options) * options.num_slots * options.bytes_per_token),
        v_(options.device, LayerCount(options) * options.num_slots * options.bytes_per_token),
        table_(options.device, (options.max_reqs + 1) * options.max_context * 4),
        blocks_(options.device, (options.max_reqs + 1) * MaxBlocks(options) * 4),
        batch_(options.device, 6 * 8 * kMaxTokens) {
    InstallArgs args;
    args.device = options.device;
    args.stream = stream_.handle();
    if (options.block_table) {
      args.block_table = blocks_.device_buffer().View(
          DType::kInt32, {options.max_reqs + 1, MaxBlocks(options)});
      args.block_size = options.block_size;
    } else {
      args.req_to_token = table_.device_buffer().View(
          DType::kInt32, {options.max_reqs + 1, options.max_context});
    }
    GroupSpec full;
    full.kind = GroupKind::kFull;
    full.num_slots = options.num_slots;
    if (options.layers > 0) {
      for (int64_t layer = 0; layer < options.layers; ++layer) {
        full.k_layers.push_back(Layer(k_, layer));
        full.v_layers.push_back(Layer(v_, layer));
      }
    } else {
      full.k_layer0 = KLayer0();
      full.v_layer0 = VLayer0();
    }
    full.bytes_per_token = options.bytes_per_token;
    full.host_slots = 64;
    if (options.edit_full_group) options.edit_full_group(full);
    args.groups = {full};
    if (options.swa_window > 0) {
      swa = std::make_unique<FakeSwaPool>(options.device, options.num_slots, options.swa_slots,
                                          options.bytes_per_token);
      args.groups.push_back(swa->Spec());
      args.swa_window_size = options.swa_window;
    }
    args.pool_slot_count = options.num_slots;
    args.max_prefill_tokens = kMaxTokens;
    args.cuda_graph_max_bs = options.cuda_graph_max_bs;
    args.graph_capture = options.graph_capture;
    args.capacities = options.capacities;
    args.log = &log;
    args.perturb = options.perturb;
    args.signal_reducer = options.signal_reducer;
    canary = CanaryManager::Install(options.config, args);
    if (canary) canary->MarkInitFinished();
  }

  ~FakeEngine() {
    try {  // nothing enqueued may outlive the buffers it reads
      Synchronize();
    } catch (...) {
    }
  }

  static constexpr int64_t kMaxTokens = 256;

  // Adds a request with `prompt_len` tokens; returns its row.
  int64_t AddRequest(int64_t prompt_len) {
    Request request;
    request.row = ++last_row_;
    for (int64_t i = 0; i < prompt_len; ++i) request.tokens.push_back(Oracle(request.row, i));
    requests_.push_back(request);
    return request.row;
  }

  // Stops scheduling request `row`. Its slots, KV bytes and table entries stay as they are, as
  // for a finished request whose prefix the engine keeps cached.
  void FinishRequest(int64_t row) {
    std::erase_if(requests_, [row](const Request& request) { return request.row == row; });
  }

  // The token every request should hold at `pos` (a token oracle: what the write-input assert
  // compares against).
  static int64_t Oracle(int64_t row, int64_t pos) { return 1000 * row + pos; }

  // Schedules one step: requests with unwritten tokens prefill them all, the others decode one
  // token. The decoded tokens pass through PerturbNextTokens, as at an engine's sampler exit. New
  // slots enter req_to_token and the batch columns are filled (on a CUDA device the copies are
  // enqueued on the engine's stream, before phase 1 reads them). With `padded_bs` larger than the
  // live rows, padding rows (req_pool_indices 0, one token each into slot 0) fill the batch up,
  // as in a captured decode graph; the host input stays unpadded.
  PreparedStep PrepareStep(int64_t padded_bs = 0) {
    Synchronize();  // the previous step's copies read the host mirrors
    std::vector<Request*> decoding;
    std::vector<int64_t> sampled;
    for (Request& request : requests_) {
      const int64_t size = static_cast<int64_t>(request.tokens.size());
      if (request.written == size) {
        decoding.push_back(&request);
        sampled.push_back(Oracle(request.row, size));
      }
    }
    canary->PerturbNextTokens(sampled);
    for (size_t i = 0; i < decoding.size(); ++i) decoding[i]->tokens.push_back(sampled[i]);
    PreparedStep step;
    std::vector<int64_t> rows, prefix, extend, expected;
    for (Request& request : requests_) {
      const int64_t begin = request.written;
      const int64_t end = static_cast<int64_t>(request.tokens.size());
      rows.push_back(request.row);
      prefix.push_back(begin);
      extend.push_back(end - begin);
      // The step's verify reads the window [written - swa_window, written): free what precedes.
      const int32_t* row_slots = Table() + request.row * options_.max_context;
      if (swa) swa->ReleaseBefore(row_slots, begin - options_.swa_window);
      for (int64_t pos = begin; pos < end; ++pos) {
        const int64_t slot = NewSlot(request.row, pos);
        if (swa) swa->Assign(slot);
        Table()[request.row * options_.max_context + pos] = static_cast<int32_t>(slot);
        step.ids.push_back(request.tokens[pos]);
        step.positions.push_back(pos);
        step.slots.push_back(slot);
        expected.push_back(Oracle(request.row, pos));
      }
      table_.Upload(4 * (request.row * options_.max_context + begin), 4 * (end - begin),
                    stream_.handle());
      request.written = end;
    }
    blocks_.UploadAll(stream_.handle());  // the step's new blocks, every row's at once
    if (swa) swa->Upload(stream_.handle());
    const int64_t live_rows = static_cast<int64_t>(rows.size());
    std::vector<int64_t> batch_rows = rows, batch_prefix = prefix, batch_extend = extend;
    std::vector<int64_t> batch_ids = step.ids, batch_positions = step.positions;
    std::vector<int64_t> batch_slots = step.slots;
    for (int64_t r = live_rows; r < padded_bs; ++r) {
      batch_rows.push_back(kReqPoolIdxPadding);
      batch_prefix.push_back(0);
      batch_extend.push_back(1);
      batch_ids.push_back(0);
      batch_positions.push_back(0);
      batch_slots.push_back(kTokenToKvSlotPadding);
    }
    const int64_t bs = static_cast<int64_t>(batch_rows.size());
    const int64_t n = static_cast<int64_t>(batch_ids.size());
    int64_t* base = batch_.host<int64_t>();
    std::memcpy(base, batch_rows.data(), 8 * bs);
    std::memcpy(base + kMaxTokens, batch_prefix.data(), 8 * bs);
    std::memcpy(base + 2 * kMaxTokens, batch_extend.data(), 8 * bs);
    std::memcpy(base + 3 * kMaxTokens, batch_ids.data(), 8 * n);
    std::memcpy(base + 4 * kMaxTokens, batch_positions.data(), 8 * n);
    std::memcpy(base + 5 * kMaxTokens, batch_slots.data(), 8 * n);
    batch_.UploadAll(stream_.handle());
    ForwardBatch batch;
    batch.batch_size = bs;
    batch.num_tokens = n;
    batch.req_pool_indices = Column(0);
    batch.prefix_lens = Column(1);
    batch.extend_seq_lens = Column(2);
    batch.input_ids = Column(3);
    batch.positions = Column(4);
    batch.out_cache_loc = Column(5);
    ForwardHostInput host;
    host.req_pool_indices = rows;
    host.prefix_lens = prefix;
    host.extend_seq_lens = extend;
    if (options_.block_table) host.block_ids = HostBlockIds(rows, prefix, extend);
    if (options_.config.enable_write_input_assert) {
      // One expectation per batch token; padding tokens are never written, so never compared.
      host.expected_input_tokens = expected;
      host.expected_input_positions = step.positions;
      host.expected_input_tokens.resize(n, 0);
      host.expected_input_positions.resize(n, 0);
    }
    last_slots = step.slots;
    step.input.forwards = {batch};
    step.input.host = {host};
    return step;
  }

  // One eager step: the four phases around the model's KV write.
  void Step(int64_t padded_bs = 0) { RunStep(PrepareStep(padded_bs)); }
  // The four phases of a prepared step.
  void RunStep(const PreparedStep& step) {
    canary->BeginStep(step.input);
    canary->PreForward(0);
    WriteKv(step);
    UploadKvRows(step);
    canary->PostForward(0);
    canary->EndStep();
  }

  // The model's KV write of a step into the host copy of the pool (on the CPU: the pool itself).
  void WriteKv(const PreparedStep& step) {
    for (size_t i = 0; i < step.slots.size(); ++i) {
      WriteKvToken(step.slots[i], step.ids[i], step.positions[i]);
    }
  }
  // Enqueues the pool rows a step wrote in every layer, host -> device (nothing on the CPU).
  void UploadKvRows(const PreparedStep& step) {
    if (step.slots.empty()) return;
    if (swa) swa->Upload(stream_.handle());
    const auto [lo, hi] = std::minmax_element(step.slots.begin(), step.slots.end());
    const int64_t bytes = (*hi - *lo + 1) * options_.bytes_per_token;
    for (int64_t layer = 0; layer < LayerCount(options_); ++layer) {
      const int64_t offset = (layer * options_.num_slots + *lo) * options_.bytes_per_token;
      k_.Upload(offset, bytes, stream_.handle());
      v_.Upload(offset, bytes, stream_.handle());
    }
  }
  // Enqueues a copy of the whole host pool to the device pool: a kernel-free "model" whose
  // launches do not depend on the step, so it can be captured in a CUDA graph (CUDA only).
  void EnqueuePoolCopy() {
    k_.UploadAll(stream_.handle());
    v_.UploadAll(stream_.handle());
  }

  int64_t SlotOf(int64_t row, int64_t pos) const { return Table()[row * options_.max_context + pos]; }
  int64_t BlockOf(int64_t row, int64_t index) const {
    return blocks_.host<int32_t>()[row * MaxBlocks(options_) + index];
  }
  // Points block `index` of `row` at `block`: in the block table, and slot by slot in
  // req_to_token, so either layout reads the same slots.
  void SetBlock(int64_t row, int64_t index, int64_t block) {
    Synchronize();
    blocks_.host<int32_t>()[row * MaxBlocks(options_) + index] = static_cast<int32_t>(block);
    blocks_.UploadAll(stream_.handle());
    for (int64_t i = 0; i < options_.block_size; ++i) {
      const int64_t pos = index * options_.block_size + i;
      Table()[row * options_.max_context + pos] = static_cast<int32_t>(block * options_.block_size + i);
    }
    table_.UploadAll(stream_.handle());
    Synchronize();
  }
  void SetSlot(int64_t row, int64_t pos, int64_t slot) {
    Synchronize();
    Table()[row * options_.max_context + pos] = static_cast<int32_t>(slot);
    table_.Upload(4 * (row * options_.max_context + pos), 4, stream_.handle());
    Synchronize();
  }
  void FlipKByte(int64_t slot, int64_t byte, int64_t layer = 0) {
    Synchronize();
    const int64_t offset = (layer * options_.num_slots + slot) * options_.bytes_per_token + byte;
    k_.host<uint8_t>()[offset] ^= 0xFF;
    k_.Upload(offset, 1, stream_.handle());
    Synchronize();
  }

  // Layer-0 K and V as [num_slots, bytes_per_token] uint8, on the engine's device.
  TensorView KLayer0() const {
    return k_.device_buffer().View(DType::kUInt8, {options_.num_slots, options_.bytes_per_token});
  }
  TensorView VLayer0() const {
    return v_.device_buffer().View(DType::kUInt8, {options_.num_slots, options_.bytes_per_token});
  }

  Device device() const { return options_.device; }
  StreamHandle stream() const { return stream_.handle(); }
  void Synchronize() const { SynchronizeStream(options_.device, stream_.handle()); }

 private:
  struct Request {
    int64_t row = 0;
    std::vector<int64_t> tokens;
    int64_t written = 0;
  };

  // Declared before the runtime, so they outlive it.
  FakeEngineOptions options_;
  OwnedStream stream_;
  MirroredBuffer k_, v_, table_, blocks_, batch_;

 public:
  CapturingLog log;
  std::unique_ptr<FakeSwaPool> swa;  // with FakeEngineOptions::swa_window > 0; outlives canary
  std::unique_ptr<CanaryManager> canary;
  std::vector<int64_t> last_slots;  // out_cache_loc of the last step

 private:
  int32_t* Table() const { return table_.host<int32_t>(); }
  TensorView Column(int index) const {
    return batch_.device_buffer().View(DType::kInt64, {kMaxTokens}, 8 * kMaxTokens * index);
  }
  void WriteKvToken(int64_t slot, int64_t token, int64_t pos) {
    for (int64_t layer = 0; layer < LayerCount(options_); ++layer) {
      const int64_t base = (layer * options_.num_slots + slot) * options_.bytes_per_token;
      FillKv(k_.host<uint8_t>() + base, v_.host<uint8_t>() + base, token, pos, layer);
    }
    // The sliding-window layer's KV of the token, in its SWA slot.
    if (swa && swa->SwaSlotOf(slot) != 0) {
      FillKv(swa->K(swa->SwaSlotOf(slot)), swa->V(swa->SwaSlotOf(slot)), token, pos, 0);
    }
  }
  void FillKv(uint8_t* k, uint8_t* v, int64_t token, int64_t pos, int64_t layer) const {
    for (int64_t b = 0; b < options_.bytes_per_token; ++b) {
      const uint64_t word =
          Splitmix64(static_cast<uint64_t>(token * 131 + pos * 7 + b / 8 + layer * 1000003));
      k[b] = static_cast<uint8_t>(word >> (8 * (b % 8)));
      v[b] = static_cast<uint8_t>(word >> (8 * (7 - b % 8)));
    }
  }

  static int64_t LayerCount(const FakeEngineOptions& options) {
    return std::max<int64_t>(options.layers, 1);
  }
  static int64_t MaxBlocks(const FakeEngineOptions& options) {
    return options.block_size > 0 ? options.max_context / options.block_size : 1;
  }
  TensorView Layer(const MirroredBuffer& pool, int64_t layer) const {
    return pool.device_buffer().View(DType::kUInt8, {options_.num_slots, options_.bytes_per_token},
                                     layer * options_.num_slots * options_.bytes_per_token);
  }
  // The next free slot, or with blocks the slot of `pos` in the row's block (a new block at
  // each block boundary; block 0 holds the padding slot and is never handed out).
  int64_t NewSlot(int64_t row, int64_t pos) {
    if (options_.block_size <= 0) return next_slot_++;
    const int64_t size = options_.block_size;
    if (pos % size == 0) {
      blocks_.host<int32_t>()[row * MaxBlocks(options_) + pos / size] =
          static_cast<int32_t>(next_block_++);
    }
    return BlockOf(row, pos / size) * size + pos % size;
  }
  std::vector<int64_t> HostBlockIds(const std::vector<int64_t>& rows,
                                    const std::vector<int64_t>& prefix,
                                    const std::vector<int64_t>& extend) const {
    std::vector<int64_t> ids;
    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t blocks = (prefix[r] + extend[r] + options_.block_size - 1) / options_.block_size;
      for (int64_t i = 0; i < blocks; ++i) ids.push_back(BlockOf(rows[r], i));
    }
    return ids;
  }

  std::vector<Request> requests_;
  int64_t last_row_ = 0;
  int64_t next_slot_ = 1, next_block_ = 1;  // slot and block 0 hold the padding slot
};

}  // namespace kvcanary::runtime::testing
