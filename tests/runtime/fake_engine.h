// A minimal engine for the runtime's integration tests: a slot pool with one layer of real K and
// V bytes, a req_to_token table, requests that prefill then decode, and the four-phase canary
// protocol around each forward. Everything lives on the CPU; a test corrupts its state directly.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime::testing {

// Collects log lines so tests can assert on them.
class CapturingLog : public LogSink {
 public:
  void Log(LogLevel level, const std::string& message) override {
    lines.push_back(std::string(LogLevelName(level)) + " " + message);
  }
  bool Contains(const std::string& text) const {
    for (const std::string& line : lines) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<std::string> lines;
};

struct FakeEngineOptions {
  int64_t num_slots = 512;
  int64_t max_reqs = 8;
  int64_t max_context = 128;
  int64_t bytes_per_token = 32;
  Config config;
  std::optional<Capacities> capacities;
  PerturbConfig perturb;
};

class FakeEngine {
 public:
  explicit FakeEngine(FakeEngineOptions options)
      : options_(options),
        k_(Device::CPU(), options.num_slots * options.bytes_per_token),
        v_(Device::CPU(), options.num_slots * options.bytes_per_token),
        table_(Device::CPU(), (options.max_reqs + 1) * options.max_context * 4),
        batch_(Device::CPU(), 6 * 8 * kMaxTokens) {
    InstallArgs args;
    args.req_to_token = table_.View(DType::kInt32, {options.max_reqs + 1, options.max_context});
    GroupSpec full;
    full.kind = GroupKind::kFull;
    full.num_slots = options.num_slots;
    full.k_layer0 = k_.View(DType::kUInt8, {options.num_slots, options.bytes_per_token});
    full.v_layer0 = v_.View(DType::kUInt8, {options.num_slots, options.bytes_per_token});
    full.bytes_per_token = options.bytes_per_token;
    full.host_slots = 64;
    args.groups = {full};
    args.pool_slot_count = options.num_slots;
    args.max_prefill_tokens = kMaxTokens;
    args.capacities = options.capacities;
    args.log = &log;
    args.perturb = options.perturb;
    canary = CanaryManager::Install(options.config, args);
    if (canary) canary->MarkInitFinished();
  }

  static constexpr int64_t kMaxTokens = 256;

  // Adds a request with `prompt_len` tokens; returns its row.
  int64_t AddRequest(int64_t prompt_len) {
    Request request;
    request.row = static_cast<int64_t>(requests_.size()) + 1;
    for (int64_t i = 0; i < prompt_len; ++i) request.tokens.push_back(Oracle(request.row, i));
    requests_.push_back(request);
    return request.row;
  }

  // The token every request should hold at `pos` (a token oracle in the sense of §11).
  static int64_t Oracle(int64_t row, int64_t pos) { return 1000 * row + pos; }

  // One step: requests with unwritten tokens prefill them all, the others decode one token. The
  // decoded tokens pass through PerturbNextTokens, as at an engine's sampler exit.
  void Step() {
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
    std::vector<int64_t> rows, prefix, extend, ids, positions, slots, expected;
    for (Request& request : requests_) {
      const int64_t begin = request.written;
      const int64_t end = static_cast<int64_t>(request.tokens.size());
      rows.push_back(request.row);
      prefix.push_back(begin);
      extend.push_back(end - begin);
      for (int64_t pos = begin; pos < end; ++pos) {
        const int64_t slot = next_slot_++;
        Table()[request.row * options_.max_context + pos] = static_cast<int32_t>(slot);
        ids.push_back(request.tokens[pos]);
        positions.push_back(pos);
        slots.push_back(slot);
        expected.push_back(Oracle(request.row, pos));
      }
      request.written = end;
    }
    const int64_t bs = static_cast<int64_t>(rows.size());
    const int64_t n = static_cast<int64_t>(ids.size());
    int64_t* base = batch_.data_as<int64_t>();
    std::memcpy(base, rows.data(), 8 * bs);
    std::memcpy(base + kMaxTokens, prefix.data(), 8 * bs);
    std::memcpy(base + 2 * kMaxTokens, extend.data(), 8 * bs);
    std::memcpy(base + 3 * kMaxTokens, ids.data(), 8 * n);
    std::memcpy(base + 4 * kMaxTokens, positions.data(), 8 * n);
    std::memcpy(base + 5 * kMaxTokens, slots.data(), 8 * n);
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
    if (options_.config.enable_write_input_assert) {
      host.expected_input_tokens = expected;
      host.expected_input_positions = positions;
    }
    last_slots = slots;
    StepInput input;
    input.forwards = {batch};
    input.host = {host};
    canary->BeginStep(input);
    canary->PreForward(0);
    for (int64_t i = 0; i < n; ++i) WriteKv(slots[i], ids[i], positions[i]);
    canary->PostForward(0);
    canary->EndStep();
  }

  int64_t SlotOf(int64_t row, int64_t pos) const { return Table()[row * options_.max_context + pos]; }
  void SetSlot(int64_t row, int64_t pos, int64_t slot) {
    Table()[row * options_.max_context + pos] = static_cast<int32_t>(slot);
  }
  void FlipKByte(int64_t slot, int64_t byte) {
    k_.data_as<uint8_t>()[slot * options_.bytes_per_token + byte] ^= 0xFF;
  }

  // Layer-0 K and V as [num_slots, bytes_per_token] uint8.
  TensorView KLayer0() const {
    return k_.View(DType::kUInt8, {options_.num_slots, options_.bytes_per_token});
  }
  TensorView VLayer0() const {
    return v_.View(DType::kUInt8, {options_.num_slots, options_.bytes_per_token});
  }

  CapturingLog log;
  std::unique_ptr<CanaryManager> canary;
  std::vector<int64_t> last_slots;  // out_cache_loc of the last step

 private:
  struct Request {
    int64_t row = 0;
    std::vector<int64_t> tokens;
    int64_t written = 0;
  };

  int32_t* Table() const { return table_.data_as<int32_t>(); }
  TensorView Column(int index) const {
    return batch_.View(DType::kInt64, {kMaxTokens}, 8 * kMaxTokens * index);
  }
  void WriteKv(int64_t slot, int64_t token, int64_t pos) {
    for (int64_t b = 0; b < options_.bytes_per_token; ++b) {
      const uint64_t word = Splitmix64(static_cast<uint64_t>(token * 131 + pos * 7 + b / 8));
      k_.data_as<uint8_t>()[slot * options_.bytes_per_token + b] = static_cast<uint8_t>(word >> (8 * (b % 8)));
      v_.data_as<uint8_t>()[slot * options_.bytes_per_token + b] = static_cast<uint8_t>(word >> (8 * (7 - b % 8)));
    }
  }

  FakeEngineOptions options_;
  DeviceBuffer k_, v_, table_, batch_;
  std::vector<Request> requests_;
  int64_t next_slot_ = 1;
};

}  // namespace kvcanary::runtime::testing
